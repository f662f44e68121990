"""The lease row Galera's upgraders take turns by (migrations/locks.py), on one MariaDB
server with the cluster's path forced: it waits for a live lease, takes over an expired
one and gives its own back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger import migrations
from agentledger.errors import DatabaseLockedError
from agentledger.migrations import locks

from ..databases import scratch_database
from ._support import drift

pytestmark = pytest.mark.mysql


@pytest.fixture
def as_on_galera(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[URL]:
    """A fresh MariaDB database whose upgrades take the Galera path."""
    monkeypatch.setattr(locks, "galera", lambda connection: True)
    with scratch_database("mysql", str(tmp_path)) as url:
        yield url


def _execute(url: URL, *statements: str) -> list[object]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            results = [connection.execute(text(sql)) for sql in statements]
            return [result.scalar() if result.returns_rows else None for result in results]
    finally:
        engine.dispose()


def _lease(url: URL, expires: str) -> None:
    _execute(
        url,
        locks._CREATE_LEASE_TABLE,
        "INSERT INTO agentledger_migration_lease VALUES "
        f"('migrations', 'another-upgrader', {expires})",
    )


def test_an_upgrade_gives_its_lease_back_and_db_check_ignores_the_lease_table(
    as_on_galera: URL,
) -> None:
    migrations.upgrade(as_on_galera)
    assert _execute(as_on_galera, "SELECT COUNT(*) FROM agentledger_migration_lease") == [0]
    assert drift(as_on_galera) == []


def test_an_upgrade_waits_for_a_live_lease_and_says_so_when_it_outlasts_the_timeout(
    as_on_galera: URL, monkeypatch: pytest.MonkeyPatch
) -> None:
    _lease(as_on_galera, "UTC_TIMESTAMP(6) + INTERVAL 1 HOUR")
    monkeypatch.setattr(locks, "MIGRATION_LOCK_TIMEOUT_S", 1)
    with pytest.raises(DatabaseLockedError, match="another agentledger migration held the lease"):
        migrations.upgrade(as_on_galera)
    assert migrations.current(as_on_galera) is None


def test_an_upgrade_takes_over_a_lease_whose_holder_died(as_on_galera: URL) -> None:
    _lease(as_on_galera, "UTC_TIMESTAMP(6) - INTERVAL 1 SECOND")
    migrations.upgrade(as_on_galera)
    assert migrations.current(as_on_galera) == migrations.head()
    assert _execute(as_on_galera, "SELECT COUNT(*) FROM agentledger_migration_lease") == [0]


def test_the_run_reads_with_wsrep_sync_wait_and_restores_the_sessions_own(
    as_on_galera: URL, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[object] = []
    real_run = locks.migration_run

    def spying_run(connection: object) -> object:
        seen.append(_scalar(connection, "SELECT @@session.wsrep_sync_wait"))
        return real_run(connection)  # type: ignore[arg-type]

    monkeypatch.setattr("agentledger.migrations.environment.migration_run", spying_run)
    engine = create_engine(as_on_galera, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            migrations.upgrade(connection)
            after = _scalar(connection, "SELECT @@session.wsrep_sync_wait")
    finally:
        engine.dispose()
    assert seen == [15] and after == 0


def _scalar(connection: object, sql: str) -> object:
    return connection.execute(text(sql)).scalar()  # type: ignore[attr-defined]
