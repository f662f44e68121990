"""A dialect agentledger was not tested on is no longer refused by name: a ledger and a
migration run take it on the portable profile, warned of once, after a probe of what
that profile relies on; what the database lacks is refused by name. Oracle is taken as
far as connecting (no server here), DuckDB as far as its probe, which it fails.
docs/dialects.md says what each of them is proven for."""

from __future__ import annotations

import asyncio
import importlib.util
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, create_engine, inspect
from sqlalchemy.dialects import registry
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg, PGDialectAsync_psycopg
from sqlalchemy.dialects.sqlite.base import SQLiteCompiler
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.engine import URL, Dialect
from sqlalchemy.ext.asyncio import create_async_engine

from agentledger import (
    AsyncLedger,
    CheckpointPayload,
    ConflictError,
    DatabaseError,
    DatabaseUnavailableError,
    Ledger,
    NewMessage,
    NewStep,
    ValidationError,
    _probe,
    migrations,
)
from agentledger._probe import probe_untested
from agentledger.engine import check_supported, create_sync_engine, urls
from agentledger.migrations.compare import differences
from agentledger.testing import SyncAdapter

from ..databases import IN_CI, dialect_params, scratch_database


class PostgresUnderAnotherName(PGDialect_psycopg):
    """A dialect agentledger does not know by name, on a server it can start: PostgreSQL
    through psycopg, named ``pglike``. agentledger takes it as any untested dialect
    (none of PostgreSQL's fast paths, types or migration branches), so it proves that
    path live."""

    name = "pglike"
    supports_statement_cache = True


class AsyncPostgresUnderAnotherName(PGDialectAsync_psycopg):
    """Its async twin."""

    name = "pglike"
    supports_statement_cache = True

    @classmethod
    def get_async_dialect_cls(cls, url: URL) -> type[Dialect]:
        return cls  # not psycopg's own async dialect, which is named postgresql


class _LockingReadsSpelledOut(SQLiteCompiler):
    def for_update_clause(self, select: Any, **kw: Any) -> str:
        return " FOR UPDATE"  # SQLite's own compiler leaves it out: SQLite has none


class SQLiteWithoutLockingReads(SQLiteDialect_pysqlite):
    """SQLite under another name, asked for ``SELECT ... FOR UPDATE``, which it refuses
    (as a database without row locks would)."""

    name = "nolocks"
    supports_statement_cache = True
    statement_compiler = _LockingReadsSpelledOut


registry.register("nolocks", __name__, "SQLiteWithoutLockingReads")
registry.register("pglike", __name__, "PostgresUnderAnotherName")
registry.register("pglike.psycopg_async", __name__, "AsyncPostgresUnderAnotherName")

ORACLE = "oracle+oracledb://scott:tiger@127.0.0.1:1/?service_name=FREEPDB1"
"""An Oracle URL nothing listens at (port 1)."""


def _installed(module: str, package: str) -> None:
    if importlib.util.find_spec(module) is None:
        message = f"{package} is not installed: python3 dev.py setup drivers installs it"
        if IN_CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


@pytest.fixture
def oracledb() -> None:
    _installed("oracledb", "oracledb")


@pytest.fixture
def duckdb_url(tmp_path: Path) -> str:
    _installed("duckdb_engine", "duckdb-engine")
    return f"duckdb:///{tmp_path / 'agentledger.duckdb'}"


@pytest.fixture
def warned_of_nothing_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(urls, "_WARNED", set())


def test_a_name_sqlalchemy_has_no_dialect_for_is_refused_as_a_bad_url() -> None:
    with pytest.raises(ValidationError, match="SQLAlchemy has no dialect of that name"):
        Ledger("nonsense://somewhere/db")


@pytest.mark.usefixtures("oracledb")
def test_a_sync_ledger_on_oracle_gets_as_far_as_connecting() -> None:
    with Ledger(ORACLE) as ledger, pytest.raises(DatabaseUnavailableError, match="DPY-6005"):
        ledger.sessions.exists("s1")


@pytest.mark.usefixtures("oracledb")
def test_an_async_ledger_on_oracle_gets_as_far_as_connecting() -> None:
    async def first_call() -> None:
        ledger = AsyncLedger(ORACLE)
        try:
            await ledger.sessions.exists("s1")
        finally:
            await ledger.close()

    with pytest.raises(DatabaseUnavailableError, match="DPY-6005"):
        asyncio.run(first_call())


@pytest.mark.usefixtures("oracledb", "warned_of_nothing_yet")
def test_an_untested_dialect_is_warned_of_once_with_what_was_not_tested(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine = create_sync_engine(ORACLE)
    with caplog.at_level(logging.WARNING, logger="agentledger.engine"):
        check_supported(engine)
        check_supported(engine)
    [record] = caplog.records
    assert "the oracle dialect (oracledb)" in record.getMessage()
    assert "no migration lock" in record.getMessage()
    engine.dispose()


@pytest.mark.usefixtures("oracledb")
def test_the_tested_dialects_are_not_warned_of(caplog: pytest.LogCaptureFixture) -> None:
    engine = create_sync_engine("sqlite://")
    with caplog.at_level(logging.WARNING, logger="agentledger.engine"):
        check_supported(engine)
    assert caplog.records == []


def test_duckdb_is_refused_by_an_upgrade_for_its_missing_savepoints(duckdb_url: str) -> None:
    with pytest.raises(DatabaseError, match=r"it has no savepoints \(SAVEPOINT\)"):
        migrations.upgrade(duckdb_url)


def test_the_refused_upgrade_leaves_no_table_on_duckdb(duckdb_url: str) -> None:
    with pytest.raises(DatabaseError):
        migrations.upgrade(duckdb_url)
    engine = create_sync_engine(duckdb_url)
    assert inspect(engine).get_table_names() == []
    engine.dispose()


def test_a_duckdb_ledger_is_refused_for_the_update_counts_it_cannot_report(
    duckdb_url: str,
) -> None:
    with Ledger(duckdb_url) as ledger, pytest.raises(DatabaseError, match="how many rows"):
        ledger.sessions.exists("s1")


def test_a_database_without_locking_reads_is_refused_by_name_and_left_as_it_was(
    tmp_path: Path,
) -> None:
    engine = create_engine(f"nolocks:///{tmp_path / 'nolocks.db'}")
    with engine.connect() as connection:
        with pytest.raises(DatabaseError, match=r"no locking reads \(SELECT \.\.\. FOR UPDATE\)"):
            probe_untested(connection)
        assert _probe_tables(connection) == []
    engine.dispose()


@pytest.mark.postgresql
def test_a_database_that_cannot_declare_the_longest_compared_text_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As Oracle under MAX_STRING_SIZE=STANDARD refuses VARCHAR2(4096 CHAR): PostgreSQL
    # refuses a VARCHAR past 10,485,760 characters.
    monkeypatch.setattr(_probe, "LONGEST_COMPARED_TEXT", 10_485_761)
    with scratch_database("postgresql", str(tmp_path)) as url:
        engine = create_engine(url.set(drivername="pglike"))
        with engine.connect() as connection:
            with pytest.raises(DatabaseError, match=r"cannot declare a text column of 10,485,761"):
                probe_untested(connection)
            assert _probe_tables(connection) == []
        engine.dispose()


def test_an_async_ledger_on_duckdb_is_refused_for_its_sync_driver(duckdb_url: str) -> None:
    with pytest.raises(ValidationError, match=r"\(duckdb_engine\) is not an asyncio driver"):
        AsyncLedger(duckdb_url)


@pytest.mark.parametrize("dialect", dialect_params())
def test_the_untested_probe_passes_on_each_tested_database_and_leaves_no_table(
    dialect: str, tmp_path: Path
) -> None:
    # The same checks an untested database must pass, on databases that have them all.
    with scratch_database(dialect, str(tmp_path)) as url:
        engine = create_sync_engine(url)
        with engine.connect() as connection:
            probe_untested(connection)
            assert _probe_tables(connection) == []
        engine.dispose()


def _probe_tables(connection: Connection) -> list[str]:
    names = inspect(connection).get_table_names()
    return [name for name in names if name.startswith("agentledger_probe")]


@pytest.fixture(params=["sync", "async"])
async def untested(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """A ledger of each API on an untested dialect (``pglike``), migrated by a plain
    ``migrations.upgrade`` of its engine."""
    with scratch_database("postgresql", str(tmp_path)) as base:
        sync_url = base.set(drivername="pglike")
        engine = create_engine(sync_url)
        migrations.upgrade(engine)
        engine.dispose()
        if request.param == "async":
            async_engine = create_async_engine(base.set(drivername="pglike+psycopg_async"))
            assert async_engine.dialect.name == "pglike"
            opened: Any = AsyncLedger(engine=async_engine)
        else:
            opened = SyncAdapter(Ledger(engine=create_engine(sync_url)))
        try:
            yield opened
        finally:
            await opened.close()
            if request.param == "async":
                await async_engine.dispose()
            else:
                opened.engine.dispose()


@pytest.mark.postgresql
def test_an_untested_dialect_migrates_to_head_with_the_tables_its_models_declare(
    tmp_path: Path,
) -> None:
    with scratch_database("postgresql", str(tmp_path)) as base:
        engine = create_engine(base.set(drivername="pglike"))
        try:
            migrations.upgrade(engine)
            assert migrations.current(engine) == migrations.head()
            with engine.connect() as connection:
                assert differences(connection, None) == []
        finally:
            engine.dispose()


@pytest.mark.postgresql
async def test_an_untested_dialect_keeps_a_conversation_and_catches_a_stale_writer(
    untested: Any,
) -> None:
    session = await untested.sessions.create("s", state={"turns": 0})
    await untested.messages.append(session, NewMessage(role="user", content="hi"))
    with pytest.raises(ConflictError) as stale:
        await untested.messages.append(session, NewMessage(role="user", content="late"))
    assert stale.value.reason == "stale"
    steps = await untested.steps.append("s", [NewStep(kind="model"), NewStep(kind="tool")])
    assert [step.seq for step in steps] == [1, 2]
    saved = await untested.checkpoints.save(
        "s", CheckpointPayload(context_window=[NewMessage(role="user", content="hi")])
    )
    latest = await untested.checkpoints.latest("s")
    assert latest is not None and latest.ref == saved.ref
    assert [m.content for m in await untested.messages.all("s")] == ["hi"]


@pytest.mark.postgresql
async def test_an_untested_dialect_searches_memory_without_json_functions_or_a_text_index(
    untested: Any,
) -> None:
    await untested.memory.put(("m", "ada"), "a", {"diet": "vegan"}, text="pasta with family")
    await untested.memory.put(("m", "ada"), "b", {"diet": "any"}, text="東京タワー")
    found = await untested.memory.search(("m", "ada"), words="pasta")
    assert [item.key for item in found] == ["a"]
    filtered = await untested.memory.search(("m", "ada"), filter={"diet": "any"})
    assert [item.key for item in filtered] == ["b"]


@pytest.mark.postgresql
def test_a_user_who_may_not_create_a_table_is_probed_for_savepoints_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with scratch_database("postgresql", str(tmp_path)) as url:
        owner = create_engine(url.set(drivername="pglike"))
        migrations.upgrade(owner)
        owner.dispose()
        admin = create_engine(url, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            for statement in (
                "DROP ROLE IF EXISTS agentledger_untested_reader",
                "CREATE ROLE agentledger_untested_reader LOGIN",
                "REVOKE CREATE ON SCHEMA public FROM PUBLIC",
                "GRANT SELECT ON ALL TABLES IN SCHEMA public TO agentledger_untested_reader",
            ):
                connection.exec_driver_sql(statement)
        reader = create_engine(url.set(drivername="pglike", username="agentledger_untested_reader"))
        try:
            with (
                caplog.at_level(logging.WARNING, logger="agentledger.probe"),
                Ledger(engine=reader) as ledger,
            ):
                assert ledger.sessions.exists("anyone") is False
            assert "probed only savepoints" in caplog.text
        finally:
            reader.dispose()
            with admin.connect() as connection:
                connection.exec_driver_sql("DROP OWNED BY agentledger_untested_reader")
                connection.exec_driver_sql("DROP ROLE agentledger_untested_reader")
            admin.dispose()


@pytest.mark.postgresql
@pytest.mark.parametrize(
    ("drivername", "lock_timeout"),
    [("postgresql+psycopg", "15s"), ("pglike", "0")],
    ids=["tested-postgresql", "untested-pglike"],
)
def test_a_ledger_sets_its_lock_timeout_only_on_a_dialect_it_was_tested_on(
    tmp_path: Path, drivername: str, lock_timeout: str
) -> None:
    # The same server under both names: its own default (0, none) stays on the untested one.
    with (
        scratch_database("postgresql", str(tmp_path)) as base,
        Ledger(base.set(drivername=drivername)) as ledger,
        ledger.engine.connect() as connection,
    ):
        shown = [
            connection.exec_driver_sql(f"SHOW {name}").scalar()
            for name in ("lock_timeout", "statement_timeout")
        ]
    assert shown == [lock_timeout, "0"]


@pytest.mark.parametrize("timeout", ["lock_timeout", "statement_timeout"])
def test_a_timeout_asked_of_a_sync_ledger_on_an_untested_dialect_is_refused(timeout: str) -> None:
    with pytest.raises(ValidationError, match="does not know how to set a timeout on the pglike"):
        Ledger("pglike://postgres@127.0.0.1:1/db", **{timeout: 2.0})


@pytest.mark.parametrize("timeout", ["lock_timeout", "statement_timeout"])
def test_a_timeout_asked_of_an_async_ledger_on_an_untested_dialect_is_refused(
    timeout: str,
) -> None:
    with pytest.raises(ValidationError, match="does not know how to set a timeout on the pglike"):
        AsyncLedger("pglike+psycopg_async://postgres@127.0.0.1:1/db", **{timeout: 2.0})
