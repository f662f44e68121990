"""A ledger's retry policy: set on either ledger, it decides how often the ledger runs a
failed call again and how often ``run`` runs a unit of work again; ``run`` can take its
own; a ledger given none uses its database's budget."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event

from agentledger import (
    AsyncLedger,
    ConflictError,
    Ledger,
    NewMessage,
    RetryPolicy,
    _runner,
    migrations,
)
from agentledger._dialects import capabilities

NO_WAIT = {"base_delay": 0.0, "max_delay": 0.0}


@contextmanager
def deadlocks_on_insert(engine: Engine, times: int) -> Iterator[list[int]]:
    """The first ``times`` INSERTs on ``engine`` fail as a deadlock would (the
    serialization failure every ledger-level call retries); yields the INSERTs tried."""
    tried: list[int] = []

    def before(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT"):
            tried.append(1)
            if len(tried) <= times:
                raise ConflictError("injected deadlock", reason="serialization")

    event.listen(engine, "before_cursor_execute", before)
    try:
        yield tried
    finally:
        event.remove(engine, "before_cursor_execute", before)


def test_a_ledger_given_no_policy_makes_its_databases_number_of_attempts() -> None:
    with Ledger.in_memory() as ledger:
        ledger.sessions.create("s")
        budget = capabilities(ledger.engine.dialect).retry_attempts
        with deadlocks_on_insert(ledger.engine, times=100) as tried, pytest.raises(ConflictError):
            ledger.messages.append("s", NewMessage(role="user", content="hi"))
        assert len(tried) == budget


def test_a_ledgers_policy_sets_how_often_a_ledger_level_call_is_retried() -> None:
    with Ledger.in_memory(retry=RetryPolicy(attempts=7, **NO_WAIT)) as ledger:
        ledger.sessions.create("s")
        with deadlocks_on_insert(ledger.engine, times=6) as tried:
            ledger.messages.append("s", NewMessage(role="user", content="hi"))
        assert len(tried) == 7
        assert [m.content for m in ledger.messages.all("s")] == ["hi"]


def test_an_async_ledgers_policy_sets_how_often_a_ledger_level_call_is_retried() -> None:
    async def scenario() -> tuple[int, list[str]]:
        async with AsyncLedger.in_memory(retry=RetryPolicy(attempts=7, **NO_WAIT)) as ledger:
            await ledger.sessions.create("s")
            with deadlocks_on_insert(ledger.engine.sync_engine, times=6) as tried:
                await ledger.messages.append("s", NewMessage(role="user", content="hi"))
            return len(tried), [m.content for m in await ledger.messages.all("s")]

    assert asyncio.run(scenario()) == (7, ["hi"])


def test_a_call_that_outlasts_the_ledgers_attempts_raises_and_warns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with Ledger.in_memory(retry=RetryPolicy(attempts=2, **NO_WAIT)) as ledger:
        ledger.sessions.create("s")
        with (
            deadlocks_on_insert(ledger.engine, times=2),
            caplog.at_level("WARNING", logger="agentledger.retry"),
            pytest.raises(ConflictError) as raised,
        ):
            ledger.messages.append("s", NewMessage(role="user", content="hi"))
        assert raised.value.reason == "serialization"
        assert ledger.messages.all("s") == []
    messages = [r.getMessage() for r in caplog.records if r.name == "agentledger.retry"]
    assert messages[-1].startswith("gave up on MessageRepository.append after 2 attempts")


def always_stale(tries: list[int]) -> Any:
    def turn(_uow: Any) -> None:
        tries.append(1)
        raise ConflictError("someone else wrote first", reason="stale")

    return turn


def test_run_follows_the_ledgers_policy() -> None:
    tries: list[int] = []
    with (
        Ledger.in_memory(retry=RetryPolicy(attempts=5, **NO_WAIT)) as ledger,
        pytest.raises(ConflictError),
    ):
        ledger.run(always_stale(tries))
    assert len(tries) == 5


def test_runs_own_policy_overrides_the_ledgers() -> None:
    tries: list[int] = []
    with (
        Ledger.in_memory(retry=RetryPolicy(attempts=5, **NO_WAIT)) as ledger,
        pytest.raises(ConflictError),
    ):
        ledger.run(always_stale(tries), retry=RetryPolicy(attempts=2, **NO_WAIT))
    assert len(tries) == 2


def test_runs_retries_count_is_the_ledgers_policy_with_that_many_retries() -> None:
    tries: list[int] = []
    with (
        Ledger.in_memory(retry=RetryPolicy(attempts=9, **NO_WAIT)) as ledger,
        pytest.raises(ConflictError),
    ):
        ledger.run(always_stale(tries), retries=2)
    assert len(tries) == 3


def test_an_async_run_takes_a_policy_too() -> None:
    tries: list[int] = []

    async def turn(_uow: Any) -> None:
        tries.append(1)
        raise ConflictError("someone else wrote first", reason="stale")

    async def scenario() -> None:
        async with AsyncLedger.in_memory() as ledger:
            await ledger.run(turn, retry=RetryPolicy(attempts=6, **NO_WAIT))

    with pytest.raises(ConflictError):
        asyncio.run(scenario())
    assert len(tries) == 6


def test_a_run_that_gives_up_says_so_in_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with (
        Ledger.in_memory(retry=RetryPolicy(attempts=3, **NO_WAIT)) as ledger,
        caplog.at_level("WARNING", logger="agentledger.retry"),
        pytest.raises(ConflictError),
    ):
        ledger.run(always_stale([]))
    last = [r.getMessage() for r in caplog.records if r.name == "agentledger.retry"][-1]
    assert last.startswith("gave up on ledger.run(")
    assert "after 3 attempts: ConflictError: someone else wrote first" in last


def test_an_async_runs_warnings_name_the_callers_function(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def add_a_note(_uow: Any) -> None:
        raise ConflictError("someone else wrote first", reason="stale")

    async def scenario() -> None:
        async with AsyncLedger.in_memory(retry=RetryPolicy(attempts=2, **NO_WAIT)) as ledger:
            with pytest.raises(ConflictError):
                await ledger.run(add_a_note)

    with caplog.at_level("WARNING", logger="agentledger.retry"):
        asyncio.run(scenario())
    messages = [r.getMessage() for r in caplog.records if r.name == "agentledger.retry"]
    assert messages and all("ledger.run(" in m and "add_a_note)" in m for m in messages)


def test_a_ledger_on_a_cluster_the_probe_found_takes_the_clusters_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_runner, "cluster_of", lambda _connection: "galera")
    monkeypatch.setattr(time, "sleep", lambda _seconds: None)  # the cluster's waits
    with Ledger.in_memory() as ledger:
        ledger.sessions.create("s")
        with deadlocks_on_insert(ledger.engine, times=100) as tried, pytest.raises(ConflictError):
            ledger.messages.append("s", NewMessage(role="user", content="hi"))
    assert len(tried) == capabilities("mysql", cluster="galera").retry_attempts


def test_a_policy_given_wins_over_the_clusters_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_runner, "cluster_of", lambda _connection: "galera")
    with Ledger.in_memory(retry=RetryPolicy(attempts=2, **NO_WAIT)) as ledger:
        ledger.sessions.create("s")
        with deadlocks_on_insert(ledger.engine, times=100) as tried, pytest.raises(ConflictError):
            ledger.messages.append("s", NewMessage(role="user", content="hi"))
    assert len(tried) == 2


def test_a_ledgers_first_call_on_a_cluster_already_takes_the_clusters_budget(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The budget is known once the first attempt has probed the database: the policy is
    # asked for after a failure, not before the first attempt.
    url = f"sqlite:///{tmp_path / 'cluster.db'}"
    migrations.upgrade(url)
    monkeypatch.setattr(_runner, "cluster_of", lambda _connection: "galera")
    monkeypatch.setattr(time, "sleep", lambda _seconds: None)
    tried: list[int] = []

    def before(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO AGENTLEDGER_SESSIONS"):
            tried.append(1)
            raise ConflictError("injected deadlock", reason="serialization")

    with Ledger(url) as ledger:
        event.listen(ledger.engine, "before_cursor_execute", before)
        with pytest.raises(ConflictError):
            ledger.sessions.create("s")
    assert len(tried) == capabilities("mysql", cluster="galera").retry_attempts
