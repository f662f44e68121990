"""SQLite engines get WAL, a busy timeout, foreign keys, and BEGIN IMMEDIATE for writes."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy.event
from sqlalchemy import event

from agentledger import AsyncLedger, Ledger, migrations
from agentledger.engine import create_sync_engine

pytestmark = pytest.mark.sqlite


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/setup.db"
    migrations.upgrade(url)
    return url


def statements_of(engine: Any) -> list[str]:
    seen: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *args: seen.append(args[2]))
    return seen


def test_connections_use_wal_foreign_keys_and_a_busy_timeout(url: str) -> None:
    with Ledger(url) as ledger, ledger.engine.connect() as connection:
        pragma = connection.exec_driver_sql
        assert pragma("PRAGMA journal_mode").scalar() == "wal"
        assert pragma("PRAGMA foreign_keys").scalar() == 1
        assert pragma("PRAGMA busy_timeout").scalar() == 15000


def test_a_connection_opened_while_another_writes_without_wal_still_opens(
    tmp_path: Path,
) -> None:
    path = tmp_path / "rollback-journal.db"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("CREATE TABLE t (x INTEGER)")
    writer.execute("BEGIN IMMEDIATE")  # SQLite then refuses a WAL switch without waiting
    writer.execute("INSERT INTO t VALUES (1)")
    engine = create_sync_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "delete"
        writer.execute("COMMIT")
        engine.dispose()

        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("SELECT x FROM t").scalar() == 1
    finally:
        engine.dispose()
        writer.close()


def test_a_unit_of_work_begins_immediate_and_a_read_begins_deferred(url: str) -> None:
    with Ledger(url) as ledger:
        ledger.sessions.exists("warm-up")
        seen = statements_of(ledger.engine)
        with ledger.unit_of_work() as uow:
            uow.sessions.create("w")
        ledger.sessions.get("w")
    begins = [sql for sql in seen if sql.startswith("BEGIN")]
    assert begins == ["BEGIN IMMEDIATE", "BEGIN"]


def test_an_engine_the_event_registry_takes_for_a_configured_one_is_still_configured(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLAlchemy's event registry keys listeners by the ``id()`` of their engine: a new
    engine at the address of a freed, configured one could pass for configured
    (``event.contains``). Here the registry says so of every engine."""
    monkeypatch.setattr(sqlalchemy.event, "contains", lambda *_args, **_kwargs: True)
    with Ledger(url) as ledger:
        ledger.sessions.exists("warm-up")
        seen = statements_of(ledger.engine)
        ledger.sessions.create("w")
        assert [sql for sql in seen if sql.startswith("BEGIN")] == ["BEGIN IMMEDIATE"]
        with ledger.engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


async def test_the_async_api_begins_the_same_way(url: str) -> None:
    async with AsyncLedger(url) as ledger:
        await ledger.sessions.exists("warm-up")
        seen = statements_of(ledger.engine.sync_engine)
        await ledger.sessions.create("w")
        await ledger.sessions.get("w")
    assert [sql for sql in seen if sql.startswith("BEGIN")] == ["BEGIN IMMEDIATE", "BEGIN"]


def test_a_reader_is_not_blocked_by_an_open_write(url: str) -> None:
    with Ledger(url) as writer, Ledger(url) as reader:
        writer.sessions.create("before")
        with writer.unit_of_work() as uow:
            uow.sessions.create("pending")
            assert reader.sessions.exists("before")
            assert not reader.sessions.exists("pending")
        assert reader.sessions.exists("pending")
