"""A connection killed by the server mid-transaction (T8): the caller gets a retryable
DatabaseUnavailableError, nothing partial is stored, the next call works, and
``ledger.run`` retries the unit of work to success exactly once. Killed just before
the COMMIT, the loss shows only at the COMMIT, whose outcome the client cannot know:
``CommitUnknownError``, and ``ledger.run`` does not replay it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger import (
    AsyncLedger,
    CommitUnknownError,
    DatabaseUnavailableError,
    Ledger,
    NewMessage,
    RetryPolicy,
)
from agentledger.engine import pool as engine_pool

from ..databases import migrated_database
from ..ports import free_port
from . import summary

SERVERS = [
    pytest.param("postgresql", marks=pytest.mark.postgresql),
    pytest.param("mysql", marks=pytest.mark.mysql),
]
OWN_ID = {"postgresql": "SELECT pg_backend_pid()", "mysql": "SELECT CONNECTION_ID()"}


@pytest.fixture(params=SERVERS)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[URL]:
    with migrated_database(request.param, tmp_path) as url:
        yield url


def kill(url: URL, connection_id: int) -> None:
    """Terminate a server connection from an administrator's connection."""
    admin = create_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        if url.get_backend_name() == "postgresql":
            connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": connection_id})
        else:
            connection.execute(text(f"KILL {int(connection_id)}"))
    admin.dispose()


def sync_kill_own_connection(uow: Any, url: URL) -> None:
    own = uow.session.execute(text(OWN_ID[url.get_backend_name()])).scalar()
    kill(url, int(own))


async def async_kill_own_connection(uow: Any, url: URL) -> None:
    own = (await uow.session.execute(text(OWN_ID[url.get_backend_name()]))).scalar()
    kill(url, int(own))


def test_sync_unit_of_work_lost_mid_transaction(server: URL) -> None:
    with Ledger(server) as ledger:
        ledger.sessions.create("victim")
        with pytest.raises(DatabaseUnavailableError) as raised, ledger.unit_of_work() as uow:
            record = uow.sessions.get("victim")
            uow.messages.append(record, NewMessage(role="user", content="lost"))
            sync_kill_own_connection(uow, server)
            uow.sessions.create("also-lost")
        assert raised.value.retryable
        assert server.password is None or server.password not in str(raised.value)
        assert ledger.messages.all("victim") == []
        assert not ledger.sessions.exists("also-lost")
        ledger.sessions.create("next-call-works")
    summary.add(f"{server.get_backend_name()} connections killed", killed=1)


async def test_async_unit_of_work_lost_mid_transaction(server: URL) -> None:
    async with AsyncLedger(server) as ledger:
        await ledger.sessions.create("victim")
        with pytest.raises(DatabaseUnavailableError) as raised:
            async with ledger.unit_of_work() as uow:
                record = await uow.sessions.get("victim")
                await uow.messages.append(record, NewMessage(role="user", content="lost"))
                await async_kill_own_connection(uow, server)
                await uow.sessions.create("also-lost")
        assert raised.value.retryable
        assert await ledger.messages.all("victim") == []
        assert not await ledger.sessions.exists("also-lost")
        await ledger.sessions.create("next-call-works")
    summary.add(f"{server.get_backend_name()} connections killed", killed=1)


def test_run_retries_a_lost_connection_to_success_exactly_once(server: URL) -> None:
    attempts = []

    def append_once(uow: Any) -> int:
        attempts.append(1)
        record = uow.sessions.get("retry")
        record = uow.messages.append(
            record, NewMessage(role="user", content="exactly once")
        ).session
        if len(attempts) == 1:
            sync_kill_own_connection(uow, server)
            uow.sessions.get("retry")  # the loss shows before COMMIT: nothing was stored
        return int(record.revision)

    with Ledger(server) as ledger:
        ledger.sessions.create("retry")
        assert ledger.run(append_once) == 2
        assert [m.content for m in ledger.messages.all("retry")] == ["exactly once"]
    assert len(attempts) == 2
    summary.add(f"{server.get_backend_name()} connections killed", killed=1)


async def test_async_run_retries_a_lost_connection_to_success_exactly_once(server: URL) -> None:
    attempts = []

    async def append_once(uow: Any) -> int:
        attempts.append(1)
        record = await uow.sessions.get("retry")
        record = (
            await uow.messages.append(record, NewMessage(role="user", content="once"))
        ).session
        if len(attempts) == 1:
            await async_kill_own_connection(uow, server)
            await uow.sessions.get("retry")  # the loss shows before COMMIT
        return int(record.revision)

    async with AsyncLedger(server) as ledger:
        await ledger.sessions.create("retry")
        assert await ledger.run(append_once) == 2
        assert [m.content for m in await ledger.messages.all("retry")] == ["once"]
    assert len(attempts) == 2
    summary.add(f"{server.get_backend_name()} connections killed", killed=1)


def test_run_does_not_replay_a_unit_of_work_lost_at_its_commit(server: URL) -> None:
    attempts = []

    def append_then_lose(uow: Any) -> None:
        attempts.append(1)
        uow.messages.append("lost-at-commit", NewMessage(role="user", content="maybe"))
        sync_kill_own_connection(uow, server)

    with Ledger(server) as ledger:
        ledger.sessions.create("lost-at-commit")
        with pytest.raises(CommitUnknownError) as raised:
            ledger.run(append_then_lose)
        assert not raised.value.retryable
        assert ledger.messages.all("lost-at-commit") == []
    assert len(attempts) == 1
    summary.add(f"{server.get_backend_name()} connections killed", killed=1)


def pooled_connection_id(ledger: Ledger, url: URL) -> int:
    """The server id of the connection the ledger's pool will hand out next."""
    with ledger.engine.connect() as connection:
        return int(connection.exec_driver_sql(OWN_ID[url.get_backend_name()]).scalar_one())


def test_a_call_on_a_pooled_connection_the_server_dropped_runs_again(server: URL) -> None:
    with Ledger(server) as ledger:
        ledger.sessions.create("before")
        kill(server, pooled_connection_id(ledger, server))
        ledger.sessions.create("after")
        assert ledger.sessions.exists("after")
    summary.add(f"{server.get_backend_name()} connections killed", killed=1)


async def test_an_async_call_on_a_dropped_pooled_connection_runs_again(server: URL) -> None:
    async with AsyncLedger(server) as ledger:
        await ledger.sessions.create("before")
        async with ledger.engine.connect() as connection:
            own = await connection.exec_driver_sql(OWN_ID[server.get_backend_name()])
            pooled = int(own.scalar_one())
        kill(server, pooled)
        await ledger.sessions.create("after")
        assert await ledger.sessions.exists("after")
    summary.add(f"{server.get_backend_name()} connections killed", killed=1)


def test_a_connection_idle_past_the_threshold_is_pinged_before_use(
    server: URL, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Ledger(server) as ledger:
        ledger.sessions.create("before")
        monkeypatch.setattr(engine_pool, "IDLE_PING_S", 0.0)
        kill(server, pooled_connection_id(ledger, server))
        with ledger.unit_of_work() as uow:  # a unit of work is never run again
            uow.sessions.create("after")
        assert ledger.sessions.exists("after")
    summary.add(f"{server.get_backend_name()} connections killed", killed=1)


def test_a_connection_used_a_moment_ago_is_not_pinged(server: URL) -> None:
    with Ledger(server) as ledger:
        ledger.sessions.create("before")
        kill(server, pooled_connection_id(ledger, server))
        with pytest.raises(DatabaseUnavailableError), ledger.unit_of_work() as uow:
            uow.sessions.create("after")
        assert not ledger.sessions.exists("after")
    summary.add(f"{server.get_backend_name()} connections killed", killed=1)


def test_a_call_whose_database_stops_answering_fails_after_one_retry_whatever_the_budget(
    server: URL, caplog: pytest.LogCaptureFixture
) -> None:
    policy = RetryPolicy(attempts=30, base_delay=0.01, max_delay=0.01)
    with Ledger(server, retry=policy) as ledger:
        ledger.sessions.create("before")
        port = free_port()

        @event.listens_for(ledger.engine, "do_connect")
        def refused(dialect: Any, record: Any, args: Any, params: dict[str, Any]) -> None:
            params.update(host="127.0.0.1", port=port)

        ledger.engine.pool.dispose()  # the next call needs a new connection
        with (
            caplog.at_level(logging.WARNING, logger="agentledger.retry"),
            pytest.raises(DatabaseUnavailableError) as raised,
        ):
            ledger.sessions.create("after")
        assert raised.value.retryable
        retries = [r for r in caplog.records if r.getMessage().startswith("retrying")]
        assert len(retries) == 1
        event.remove(ledger.engine, "do_connect", refused)
        assert not ledger.sessions.exists("after")
