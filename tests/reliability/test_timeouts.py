"""Timeouts and the faults they stand for, on every dialect: the ledger's lock and
statement timeouts are set on each connection (PostgreSQL no longer waits forever), a
lock wait runs out once (never retried on top of itself), and statement timeouts,
read-only transactions and a full database each get their one class."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger import (
    AsyncLedger,
    DatabaseLockedError,
    Ledger,
    NewMessage,
    PermissionDeniedError,
    QueryCancelledError,
    ResourceExhaustedError,
    ValidationError,
)
from agentledger._translate import translate

from . import summary

SETTINGS = {
    "postgresql": "SELECT current_setting('lock_timeout'), current_setting('statement_timeout')",
    "mysql": "SELECT @@innodb_lock_wait_timeout, @@max_statement_time",
    "sqlite": "PRAGMA busy_timeout",
}
SLEEP = {"postgresql": "SELECT pg_sleep(5)", "mysql": "SELECT SLEEP(5)"}


def settings(ledger: Ledger) -> tuple[Any, ...]:
    with ledger.unit_of_work() as uow:
        backend = ledger.engine.dialect.name
        return tuple(uow.session.execute(text(SETTINGS[backend])).one())


def test_a_ledger_waits_15_seconds_for_a_lock_by_default(migrated_url: URL) -> None:
    expected = {"postgresql": "15s", "mysql": 15, "sqlite": 15000}
    with Ledger(migrated_url) as ledger:
        found = settings(ledger)
    assert found[0] == expected[migrated_url.get_backend_name()]


def test_the_timeouts_given_are_set_on_every_connection(migrated_url: URL) -> None:
    expected = {
        "postgresql": ("2500ms", "4s"),
        "mysql": ("3", "4"),  # InnoDB's lock wait is whole seconds, rounded up
        "sqlite": ("2500",),
    }
    with Ledger(migrated_url, lock_timeout=2.5, statement_timeout=4) as ledger:
        found = settings(ledger)
    as_text = tuple(f"{v:g}" if isinstance(v, int | float) else str(v) for v in found)
    assert as_text == expected[migrated_url.get_backend_name()]


async def test_the_async_ledger_sets_them_too(migrated_url: URL) -> None:
    backend = migrated_url.get_backend_name()
    driver = {"postgresql": "asyncpg", "mysql": "aiomysql", "sqlite": "aiosqlite"}[backend]
    async with (
        AsyncLedger(migrated_url.set(drivername=f"{backend}+{driver}"), lock_timeout=2) as ledger,
        ledger.unit_of_work() as uow,
    ):
        found = (await uow.session.execute(text(SETTINGS[backend]))).first()
    assert found is not None
    assert str(found[0]) == {"postgresql": "2s", "mysql": "2", "sqlite": "2000"}[backend]


@pytest.mark.parametrize(
    ("options", "path"),
    [
        ({"lock_timeout": 0}, "lock_timeout"),
        ({"lock_timeout": "15"}, "lock_timeout"),
        ({"statement_timeout": -1}, "statement_timeout"),
        ({"statement_timeout": True}, "statement_timeout"),
    ],
)
def test_a_timeout_that_is_not_a_positive_number_of_seconds_is_refused(
    options: dict[str, Any], path: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        Ledger("sqlite://", **options)
    assert raised.value.path == path


def test_a_timeout_with_a_borrowed_engine_is_refused() -> None:
    engine = create_engine("sqlite://")
    with pytest.raises(ValidationError) as raised:
        Ledger(engine=engine, lock_timeout=1)
    assert raised.value.path == "lock_timeout"
    engine.dispose()


@contextmanager
def row_locked(url: URL, session_id: str) -> Iterator[None]:
    """Another connection holds the session row's write lock (SQLite: the database's)."""
    engine = create_engine(url, poolclass=NullPool)
    with engine.connect() as connection:
        if url.get_backend_name() == "sqlite":
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            connection.execute(
                text("SELECT id FROM agentledger_sessions WHERE id = :id FOR UPDATE"),
                {"id": session_id},
            )
        yield
        connection.rollback()
    engine.dispose()


def test_a_lock_wait_runs_out_once_and_is_not_retried(migrated_url: URL) -> None:
    with Ledger(migrated_url, lock_timeout=0.5) as ledger:
        ledger.sessions.create("held")
        attempts = []
        # Each attempt is a transaction of its own on a connection from the pool.
        event.listen(ledger.engine.pool, "checkout", lambda *_: attempts.append(1))
        with row_locked(migrated_url, "held"), pytest.raises(DatabaseLockedError) as raised:
            ledger.messages.append("held", NewMessage(role="user", content="waits"))
        assert not raised.value.retryable
        assert len(attempts) == 1
        assert ledger.messages.all("held") == []
    summary.add(f"{migrated_url.get_backend_name()} lock timeout", waits=1, retries=0)


def test_run_does_not_wait_for_a_lock_again(migrated_url: URL) -> None:
    attempts = []

    def append(uow: Any) -> None:
        attempts.append(1)
        uow.messages.append("held-run", NewMessage(role="user", content="waits"))

    with Ledger(migrated_url, lock_timeout=0.5) as ledger:
        ledger.sessions.create("held-run")
        with row_locked(migrated_url, "held-run"), pytest.raises(DatabaseLockedError):
            ledger.run(append)
    assert len(attempts) == 1


def test_a_statement_past_its_timeout_is_cancelled(migrated_url: URL) -> None:
    dialect = migrated_url.get_backend_name()
    if dialect == "sqlite":
        pytest.skip("SQLite has no statement timeout (a statement waits only for the lock)")
    with Ledger(migrated_url, statement_timeout=0.2) as ledger:
        # The unit of work's own session: its errors are the driver's, translated here.
        with pytest.raises(sa_exc.OperationalError) as raised, ledger.unit_of_work() as uow:
            uow.session.execute(text(SLEEP[dialect])).all()
        cancelled = translate(raised.value, migrated_url)
        assert type(cancelled) is QueryCancelledError and not cancelled.retryable
        assert ledger.sessions.exists("anything") is False


def test_a_write_in_a_read_only_transaction_is_permission_denied(migrated_url: URL) -> None:
    backend = migrated_url.get_backend_name()
    if backend == "sqlite":
        pytest.skip("SQLite has no read-only transaction; tests/reliability/test_read_only.py")
    with Ledger(migrated_url) as ledger:
        with pytest.raises(PermissionDeniedError), ledger.unit_of_work() as uow:
            uow.session.execute(text("SET TRANSACTION READ ONLY"))
            uow.sessions.create("read-only")
        assert not ledger.sessions.exists("read-only")


def test_a_full_sqlite_database_is_out_of_disk_space(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path}/full.db"
    with Ledger(url) as ledger:
        ledger.upgrade()
        ledger.sessions.create("full")
        with pytest.raises(ResourceExhaustedError) as raised, ledger.unit_of_work() as uow:
            pages = uow.session.execute(text("PRAGMA page_count")).scalar()
            uow.session.execute(text(f"PRAGMA max_page_count = {pages}"))
            uow.messages.append("full", NewMessage(role="user", content="x" * 100_000))
        assert raised.value.resource == "disk" and not raised.value.retryable
        assert ledger.messages.all("full") == []
