"""Fail-over on PostgreSQL: a ledger given both servers in one libpq multi-host URL with
``target_session_attrs=read-write`` writes on whichever is the primary. When the primary
dies and the standby is promoted, a writer that retries what the ledger says it may
retry goes on writing there: with synchronous replication (a commit is acknowledged once
the standby has it) every acknowledged append is stored once, seqs stay contiguous, and
callers see only the documented retryable classes meanwhile."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from agentledger import AsyncLedger, Ledger, NewMessage, migrations
from agentledger.errors import AgentLedgerError

from .. import private_standby
from ..databases import IN_CI

pytestmark = pytest.mark.slow

DATABASE = "agentledger_failover"
BEFORE, AFTER = 20, 20
"""Appends acknowledged before the fail-over, and after it, that the test waits for."""
DEADLINE_S = 120


@pytest.fixture
def servers() -> Iterator[private_standby.PrivateStandby]:
    """A primary and standby of this test's own: the fail-over ends the primary."""
    missing = private_standby.available()
    if missing is not None:
        message = f"the fail-over test needs PostgreSQL's binaries: {missing}"
        if IN_CI:
            pytest.fail(f"CI=true, but {message}", pytrace=False)
        pytest.skip(message)
    running = private_standby.start(DATABASE)
    try:
        admin = running.primary_url.rsplit("/", 1)[0] + "/postgres"
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {DATABASE}")
        with psycopg.connect(admin, autocommit=True) as connection:
            # Synchronous replication: an acknowledged commit is on the standby too, so
            # the fail-over loses none (asynchronous, it may lose the last ones); applied
            # there too (remote_apply), so the standby has the database when a
            # multi-host URL first tries it.
            connection.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
            connection.execute("ALTER SYSTEM SET synchronous_commit = 'remote_apply'")
            connection.execute("SELECT pg_reload_conf()")
        migrations.upgrade(running.primary_url)  # acknowledged: the standby has it too
        yield running
    finally:
        running.close()


def both_hosts(servers: private_standby.PrivateStandby) -> str:
    """The libpq multi-host URL of the pair: the standby first, so the read-write
    attribute, not the order, is what picks the primary."""
    hosts = [url.split("@")[1].split("/")[0] for url in (servers.standby_url, servers.primary_url)]
    query = "&".join(f"host={host}" for host in hosts)
    return f"postgresql://postgres@/{DATABASE}?{query}&target_session_attrs=read-write"


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_multi_host_url_writes_on_the_primary_whichever_host_comes_first(
    servers: private_standby.PrivateStandby, mode: str
) -> None:
    url = both_hosts(servers)
    if mode == "sync":
        with Ledger(url) as ledger:
            ledger.sessions.create("written")
    else:
        async with AsyncLedger(url) as ledger:
            await ledger.sessions.create("written")
    with Ledger(servers.primary_url) as primary:
        assert primary.sessions.get("written").id == "written"


def test_after_the_primary_dies_and_the_standby_is_promoted_writes_go_on_and_none_is_lost(
    servers: private_standby.PrivateStandby,
) -> None:
    acked: list[str] = []
    errors: list[str] = []
    stop = threading.Event()
    acked_times: list[float] = []

    def writer(ledger: Ledger) -> None:
        turn = 0
        while not stop.is_set():
            key = f"turn-{turn}"
            try:
                ledger.messages.append(
                    "failing-over", NewMessage(role="user", content=key, external_key=key)
                )
            except AgentLedgerError as error:
                assert error.retryable or type(error).__name__ == "CommitUnknownError", error
                errors.append(type(error).__name__)
                time.sleep(0.05)
                continue  # the same key again: a stored one is found, not added twice
            acked.append(key)
            acked_times.append(time.monotonic())
            turn += 1

    with Ledger(both_hosts(servers)) as ledger:
        ledger.sessions.create("failing-over")
        thread = threading.Thread(target=writer, args=(ledger,), daemon=True)
        thread.start()
        try:
            wait_for(lambda: len(acked) >= BEFORE)
            servers.fail_over()
            wait_for(lambda: len(acked) >= BEFORE + AFTER)
        finally:
            stop.set()
            thread.join(timeout=DEADLINE_S)
        stall = max(b - a for a, b in itertools.pairwise(acked_times))
        print(f"fail-over: the longest wait between two acknowledged appends: {stall:.2f} s")

    with Ledger(servers.standby_url) as promoted:
        stored = [m.external_key for m in promoted.messages.all("failing-over")]
        seqs = [m.seq for m in promoted.messages.all("failing-over")]
    assert stored == acked
    assert seqs == list(range(1, len(acked) + 1))
    assert set(errors) <= {"DatabaseUnavailableError", "CommitUnknownError"}


def wait_for(condition: object, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"not within {timeout} s"
        time.sleep(0.05)
