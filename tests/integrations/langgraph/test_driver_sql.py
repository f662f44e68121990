"""The saver's hot calls on driver SQL (``agentledger._driver``): they run without an
ORM Session where the engine can take driver SQL, read rows as SQLAlchemy reads them,
fall back to SQLAlchemy for what only it has, and fail as every other call fails."""

from __future__ import annotations

import inspect
import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_config
from sqlalchemy import Table, bindparam, create_engine, select, text
from sqlalchemy.pool import NullPool

from agentledger import DatabaseLockedError, Ledger, ValidationError, configure_sqlite_engine
from agentledger import _driver as driver_module
from agentledger._driver import (
    DriverConnection,
    NeedsTransaction,
    NotPrebuilt,
    driver_begin_after_first,
    transaction,
)
from agentledger.integrations.langgraph import LedgerSaver
from agentledger.models import AgentLangGraphBlob, AgentLangGraphCheckpoint, AgentSession
from agentledger.testing import tier

from ...contract._sql import orm_transactions, statements_during
from ...databases import scratch_database
from .conftest import Saved

pytestmark = pytest.mark.native
"""Each asserts a statement or path of a fast path the portable profile turns off."""

SESSIONS = cast(Table, AgentSession.__table__)
CHECKPOINTS = cast(Table, AgentLangGraphCheckpoint.__table__)
BLOBS = cast(Table, AgentLangGraphBlob.__table__)


@tier("driver")
async def test_hot_calls_on_a_stored_thread_begin_no_orm_session_where_driver_sql_runs(
    saved: Saved,
) -> None:
    config = generate_config("hot")
    checkpoint = generate_checkpoint(channel_values={"v": 1}, channel_versions={"v": 1})
    config = await saved.saver.aput(config, checkpoint, {"step": 0}, {"v": 1})
    with orm_transactions() as begun:
        following = generate_checkpoint(channel_values={"v": 2}, channel_versions={"v": 2})
        latest = await saved.saver.aput(config, following, {"step": 1}, {"v": 2})
        await saved.saver.aput_writes(latest, [("v", 3)], "task")
        found = await saved.saver.aget_tuple(generate_config("hot"))
        listed = [item async for item in saved.saver.alist(generate_config("hot"), limit=10)]
    assert found is not None and found.checkpoint["id"] == following["id"]
    assert found.pending_writes == [("task", "v", 3)]
    assert [item.checkpoint["id"] for item in listed] == [following["id"], checkpoint["id"]]
    on_driver = saved.ledger.engine.dialect.name in ("sqlite", "postgresql")
    assert (begun == []) is on_driver


@tier("driver")
async def test_a_statement_listener_on_the_engine_sees_the_hot_calls_statements(
    saved: Saved,
) -> None:
    checkpoint = generate_checkpoint(channel_values={"v": 1}, channel_versions={"v": 1})
    config = await saved.saver.aput(generate_config("seen"), checkpoint, {}, {"v": 1})
    with statements_during(SimpleNamespace(ledger=saved.ledger)) as seen:  # type: ignore[arg-type]
        await saved.saver.aput_writes(config, [("v", 2)], "task")
        found = await saved.saver.aget_tuple(generate_config("seen"))
    assert found is not None and found.pending_writes == [("task", "v", 2)]
    tables = " ".join(sql for sql, _ in seen)
    assert "agentledger_langgraph_writes" in tables
    assert "agentledger_langgraph_checkpoints" in tables


@tier("driver")
async def test_a_thread_s_first_put_creates_its_session_without_an_orm_session_on_driver_sql(
    saved: Saved,
) -> None:
    checkpoint = generate_checkpoint(channel_values={"v": 1}, channel_versions={"v": 1})
    with orm_transactions() as begun:
        await saved.saver.aput(generate_config("first"), checkpoint, {"step": 0}, {"v": 1})
    on_driver = saved.ledger.engine.dialect.name in ("sqlite", "postgresql")
    assert (begun == []) is on_driver
    found = saved.ledger.sessions.get_by_key("first", app_name="langgraph")
    session = await found if inspect.isawaitable(found) else found
    assert session.id.split(".")[0] == "langgraph"
    assert (session.revision, session.status, session.state) == (1, "active", {})
    assert (session.message_count, session.user_id, session.external_key) == (0, None, "first")


def _one_hot_thread(ledger: Ledger) -> None:
    """A new thread's first put, a write and a read: LangGraph's hot calls."""
    saver = LedgerSaver(ledger)
    checkpoint = generate_checkpoint(channel_values={"v": 1}, channel_versions={"v": 1})
    config = saver.put(generate_config("opt"), checkpoint, {"step": 0}, {"v": 1})
    saver.put_writes(config, [("v", 2)], "task")
    found = saver.get_tuple(generate_config("opt"))
    assert found is not None and found.pending_writes == [("task", "v", 2)]


@pytest.mark.parametrize("driver_sql", [True, False])
def test_the_driver_sql_option_chooses_the_path_of_the_hot_calls(
    tmp_path: Path, driver_sql: bool
) -> None:
    with Ledger(f"sqlite:///{tmp_path / 'path.db'}", driver_sql=driver_sql) as ledger:
        ledger.upgrade()
        with orm_transactions() as begun:
            _one_hot_thread(ledger)
    assert (begun == []) is driver_sql


def test_a_borrowed_engine_runs_the_hot_calls_through_sqlalchemy(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'borrowed.db'}")
    configure_sqlite_engine(engine)
    try:
        with Ledger(engine=engine) as ledger:
            ledger.upgrade()
            with orm_transactions() as begun:
                _one_hot_thread(ledger)
        assert begun != []
    finally:
        engine.dispose()


def test_driver_sql_takes_only_true_or_false() -> None:
    with pytest.raises(ValidationError, match="driver_sql must be True or False, got 'yes'"):
        Ledger("sqlite://", driver_sql="yes")  # type: ignore[arg-type]


def test_sql_logging_shows_the_statements_driver_sql_sends(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Ledger(f"sqlite:///{tmp_path / 'logged.db'}") as ledger:
        ledger.upgrade()
        with (
            orm_transactions() as begun,
            caplog.at_level(logging.INFO, logger="sqlalchemy.engine.Engine"),
        ):
            _one_hot_thread(ledger)
    assert begun == []  # every statement below went through driver SQL
    lines = [record.getMessage() for record in caplog.records]
    tagged = [line for line in lines if line.startswith("[driver SQL] ")]
    assert any("INSERT INTO agentledger_langgraph_writes" in line for line in lines)
    assert any("FROM agentledger_langgraph_checkpoints" in line for line in lines)
    assert "BEGIN IMMEDIATE" in lines and "COMMIT" in lines
    assert tagged and all("'opt'" in line for line in tagged[:2])  # the thread's key


def test_hidden_parameters_stay_hidden_in_driver_sql_s_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Ledger(f"sqlite:///{tmp_path / 'hidden.db'}") as ledger:
        ledger.upgrade()
        ledger.engine.hide_parameters = True
        with caplog.at_level(logging.INFO, logger="sqlalchemy.engine.Engine"):
            _one_hot_thread(ledger)
    tagged = {r.getMessage() for r in caplog.records if r.getMessage().startswith("[driver SQL]")}
    assert tagged == {"[driver SQL] [SQL parameters hidden due to hide_parameters=True]"}


def _sync_engine(saved: Saved) -> Any:
    if not isinstance(saved.ledger, Ledger) or saved.url is None:
        pytest.skip(
            "the sync API on a database URL only: it compares the SQL sent through the driver "
            "with what the same ledger's own engine sends"
        )
    if saved.ledger.engine.dialect.name not in ("sqlite", "postgresql"):
        pytest.skip("driver SQL runs on SQLite and PostgreSQL")
    return saved.ledger.engine


@tier("driver")
@pytest.mark.api("sync")
async def test_driver_sql_reads_a_row_as_sqlalchemy_reads_it(saved: Saved) -> None:
    engine = _sync_engine(saved)
    saved.ledger.sessions.create(id="s-1", app_name="a", state={"k": [1, "two"]})
    query = select(SESSIONS.c.id, SESSIONS.c.state, SESSIONS.c.created_at, SESSIONS.c.message_count)
    query = query.where(SESSIONS.c.id == bindparam("id"))
    with engine.connect() as connection:
        expected = connection.execute(query, {"id": "s-1"}).all()
    with transaction(engine, writes=False, autocommit=False) as driver:
        found = driver.execute(query, {"id": "s-1"}).all()
    assert found == expected
    assert found[0].state == {"k": [1, "two"]}
    assert isinstance(found[0].created_at, datetime)


@tier("driver")
@pytest.mark.api("sync")
async def test_driver_sql_reads_a_checkpoint_row_as_sqlalchemy_reads_it(saved: Saved) -> None:
    engine = _sync_engine(saved)
    checkpoint = generate_checkpoint(channel_values={"v": [1] * 500}, channel_versions={"v": "1"})
    await saved.saver.aput(generate_config("row"), checkpoint, {"step": 0, "k": "é"}, {"v": "1"})
    query = select(CHECKPOINTS, BLOBS.c.blob).join(
        BLOBS, BLOBS.c.session_id == CHECKPOINTS.c.session_id
    )
    with engine.connect() as connection:
        expected = connection.execute(query).all()
    with transaction(engine, writes=False, autocommit=False) as driver:
        found = driver.execute(query).all()
    assert [tuple(row) for row in found] == [tuple(row) for row in expected]
    assert isinstance(found[0].blob, bytes) and found[0].metadata["k"] == "é"


@tier("driver")
@pytest.mark.api("sync")
async def test_an_expanding_parameter_is_left_to_sqlalchemy(saved: Saved) -> None:
    engine = _sync_engine(saved)
    query = select(SESSIONS.c.id).where(SESSIONS.c.id.in_(bindparam("ids", expanding=True)))
    raw = engine.raw_connection()
    try:
        with pytest.raises(NotPrebuilt):
            driver = DriverConnection(raw.dbapi_connection, engine.dialect, one_statement=False)
            driver.execute(query, {"ids": ["a"]})
    finally:
        raw.close()


@tier("driver")
@pytest.mark.api("sync")
async def test_a_statement_with_returning_is_left_to_sqlalchemy(saved: Saved) -> None:
    engine = _sync_engine(saved)
    statement = SESSIONS.update().values(title="t").returning(SESSIONS.c.id)
    raw = engine.raw_connection()
    try:
        with pytest.raises(NotPrebuilt):
            driver = DriverConnection(raw.dbapi_connection, engine.dialect, one_statement=False)
            driver.execute(statement)
    finally:
        raw.close()


def test_a_put_while_another_process_holds_the_sqlite_write_lock_fails_and_stores_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "locked.db"
    with Ledger(f"sqlite:///{path}", lock_timeout=0.2) as ledger:
        ledger.upgrade()
        saver = LedgerSaver(ledger)
        first = generate_checkpoint(channel_values={"v": 1}, channel_versions={"v": 1})
        config = saver.put(generate_config("t"), first, {"step": 0}, {"v": 1})
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            blocked = generate_checkpoint(channel_values={"v": 2}, channel_versions={"v": 2})
            with pytest.raises(DatabaseLockedError, match="locked"):
                saver.put(config, blocked, {"step": 1}, {"v": 2})
        finally:
            other.execute("ROLLBACK")
            other.close()
        found = saver.get_tuple(generate_config("t"))
        assert found is not None and found.checkpoint["id"] == first["id"]
        # The pool's connection came back usable: the next put goes through.
        later = generate_checkpoint(channel_values={"v": 3}, channel_versions={"v": 3})
        saver.put(config, later, {"step": 2}, {"v": 3})
        latest = saver.get_tuple(generate_config("t"))
        assert latest is not None and latest.checkpoint["id"] == later["id"]


def test_driver_sql_binds_a_datetime_by_its_column_type(tmp_path: Path) -> None:
    with Ledger(f"sqlite:///{tmp_path / 'times.db'}") as ledger:
        ledger.upgrade()
        ledger.sessions.create(id="s-1")
        moment = datetime(2099, 1, 1, tzinfo=UTC)
        query = select(SESSIONS.c.id).where(SESSIONS.c.created_at < bindparam("moment"))
        query = query.where(SESSIONS.c.created_at.is_not(None))
        with ledger.engine.connect() as connection:
            expected = connection.execute(query, {"moment": moment}).all()
        with transaction(ledger.engine, writes=False, autocommit=False) as driver:
            found = driver.execute(query, {"moment": moment}).all()
        assert [tuple(row) for row in found] == [tuple(row) for row in expected]


@contextmanager
def _postgres_thread(tmp_path: Path) -> Iterator[tuple[Any, Ledger, LedgerSaver, Any, Any]]:
    """A scratch PostgreSQL ledger with a saver and one thread "t" of one checkpoint:
    (url, ledger, saver, that checkpoint, its config)."""
    with scratch_database("postgresql", str(tmp_path)) as url, Ledger(url) as ledger:
        ledger.upgrade()
        saver = LedgerSaver(ledger)
        first = generate_checkpoint(channel_values={"v": 1}, channel_versions={"v": "1"})
        config = saver.put(generate_config("t"), first, {"step": 0}, {"v": "1"})
        yield url, ledger, saver, first, config


@pytest.mark.postgresql
@pytest.mark.parametrize("call", ["get_tuple", "put"])
def test_a_call_on_a_pooled_connection_the_server_killed_runs_again(
    tmp_path: Path, call: str
) -> None:
    # The idle-only ping lets a connection used a moment ago through; the server killed
    # it since. A read's statement fails before any COMMIT; a write in autocommit is its
    # own COMMIT (outcome unknown), and storing the same checkpoint again is harmless:
    # both run again on a new connection.
    with _postgres_thread(tmp_path) as (url, ledger, saver, first, config):
        pooled = ledger.engine.raw_connection()
        cursor = pooled.dbapi_connection.cursor()
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
        pooled.dbapi_connection.commit()
        pooled.close()
        _terminate(url, pid)
        expected = first
        if call == "put":
            expected = generate_checkpoint(channel_values={"v": 2}, channel_versions={"v": "2"})
            saver.put(config, expected, {"step": 1}, {"v": "2"})
        found = saver.get_tuple(generate_config("t"))
        assert found is not None and found.checkpoint["id"] == expected["id"]
        stored = saver.list(generate_config("t"))
        assert next(item.checkpoint["id"] for item in stored) == expected["id"]


def _terminate(url: Any, pid: int) -> None:
    admin = create_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    finally:
        admin.dispose()


@pytest.mark.postgresql
def test_a_read_on_driver_sql_is_prepared_on_its_first_run_on_psycopg(tmp_path: Path) -> None:
    # psycopg prepares a statement after five runs by default; driver SQL asks on the
    # first, as PostgresSaver's prepare_threshold=0 does.
    with _postgres_thread(tmp_path) as (_, ledger, saver, _, _):
        assert saver.get_tuple(generate_config("t")) is not None
        with ledger.engine.connect() as connection:
            prepared = connection.execute(
                text("SELECT statement FROM pg_prepared_statements WHERE NOT from_sql")
            ).scalars()
            assert any(statement.startswith("WITH head AS") for statement in prepared)


@pytest.mark.postgresql
def test_a_one_statement_call_hands_its_connection_back_as_it_found_it(tmp_path: Path) -> None:
    # A read (and a put) runs in psycopg's autocommit: the connection goes back to the
    # pool out of it, with its isolation level untouched, so the next unit of work is a
    # transaction again.
    with _postgres_thread(tmp_path) as (_, ledger, saver, _, config):
        pooled = ledger.engine.raw_connection()
        before = (pooled.dbapi_connection.autocommit, pooled.dbapi_connection.isolation_level)
        pooled.close()
        later = generate_checkpoint(channel_values={"v": 2}, channel_versions={"v": "2"})
        saver.put(config, later, {"step": 1}, {"v": "2"})
        assert saver.get_tuple(generate_config("t")) is not None
        pooled = ledger.engine.raw_connection()
        try:
            after = (pooled.dbapi_connection.autocommit, pooled.dbapi_connection.isolation_level)
        finally:
            pooled.close()
        assert after == before and after[0] is False


@pytest.mark.postgresql
def test_a_second_statement_after_one_in_autocommit_runs_in_a_transaction(
    tmp_path: Path,
) -> None:
    # The first statement found nothing to write on (a thread's first put); the rest of
    # the call is one transaction: an error after its INSERT leaves nothing behind.
    with _postgres_thread(tmp_path) as (_, ledger, _, _, _):
        count = select(SESSIONS.c.id).where(SESSIONS.c.id == bindparam("id"))
        insert = SESSIONS.insert().values(
            id="s-2", status="active", state={}, message_count=0, message_seq=0, step_count=0,
            checkpoint_seq=0, input_tokens=0, output_tokens=0, total_tokens=0,
            created_at=datetime.now(UTC), updated_at=datetime.now(UTC), revision=1,
        )  # fmt: skip
        with (
            pytest.raises(RuntimeError, match="after the insert"),
            transaction(ledger.engine, writes=True, autocommit=True) as driver,
        ):
            assert driver.execute(count, {"id": "s-2"}).all() == []
            driver.execute(insert)
            assert driver.commit_sent is False  # the INSERT was not its own COMMIT
            raise RuntimeError("after the insert")
        assert ledger.sessions.get_or_none("s-2") is None
        with transaction(ledger.engine, writes=True, autocommit=True) as driver:
            driver.execute(count, {"id": "s-2"})
            driver.execute(insert)
        assert ledger.sessions.get("s-2").revision == 1


def test_a_second_statement_of_a_sqlite_read_in_autocommit_falls_back_to_sqlalchemy(
    tmp_path: Path,
) -> None:
    # A SQLite read's statements share a snapshot only inside one transaction, which
    # its first statement, run in the driver's autocommit, was not in.
    with Ledger(f"sqlite:///{tmp_path / 'reads.db'}") as ledger:
        ledger.upgrade()
        query = select(SESSIONS.c.id)
        with (
            pytest.raises(NeedsTransaction),
            transaction(ledger.engine, writes=False, autocommit=True) as driver,
        ):
            driver.execute(query)
            driver.execute(query)


def test_a_one_statement_sqlite_read_on_driver_sql_sends_no_begin(tmp_path: Path) -> None:
    with Ledger(f"sqlite:///{tmp_path / 'reads.db'}") as ledger:
        ledger.upgrade()
        saver = LedgerSaver(ledger)
        checkpoint = generate_checkpoint(channel_values={"v": 1}, channel_versions={"v": 1})
        saver.put(generate_config("t"), checkpoint, {"step": 0}, {"v": 1})
        pooled = ledger.engine.raw_connection()
        sent: list[str] = []
        pooled.dbapi_connection.set_trace_callback(sent.append)
        pooled.close()
        try:
            found = saver.get_tuple(generate_config("t"))
        finally:
            pooled = ledger.engine.raw_connection()
            pooled.dbapi_connection.set_trace_callback(None)
            pooled.close()
        assert found is not None and found.checkpoint["id"] == checkpoint["id"]
        assert [sql.split()[0].upper() for sql in sent] == ["WITH"]


@contextmanager
def _transactions_begun(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """The connections on which driver SQL begins a transaction after a first statement
    in autocommit, inside the block."""
    begun: list[object] = []

    def begin_after_first(dbapi_connection: Any, dialect: Any) -> bool:
        begun.append(dbapi_connection)
        return driver_begin_after_first(dbapi_connection, dialect)

    with monkeypatch.context() as patched:
        patched.setattr(driver_module, "driver_begin_after_first", begin_after_first)
        yield begun


@pytest.mark.postgresql
def test_a_root_put_without_a_parent_on_a_stored_thread_stays_in_autocommit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The statement creating the session meets the thread's key and writes nothing;
    # the write by key after it is atomic by itself, so no transaction is begun for it.
    with _postgres_thread(tmp_path) as (_, ledger, saver, _, _):
        checkpoint = generate_checkpoint(channel_values={"v": 2}, channel_versions={"v": "2"})
        with _transactions_begun(monkeypatch) as begun:
            config = saver.put(generate_config("t"), checkpoint, {"step": 1}, {"v": "2"})
        assert begun == []
        found = saver.get_tuple(generate_config("t"))
        assert found is not None and found.config == config
        assert ledger.sessions.get_by_key("t", app_name="langgraph").revision == 1


@pytest.mark.postgresql
def test_pending_writes_on_a_new_thread_create_it_in_autocommit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The write by key finds no session and writes nothing; the statement creating the
    # session and storing the writes is atomic by itself, so no transaction is begun.
    with _postgres_thread(tmp_path) as (_, ledger, saver, _, _):
        config = generate_config("new", checkpoint_id="1")
        with _transactions_begun(monkeypatch) as begun:
            saver.put_writes(config, [("v", 2)], "task")
        assert begun == []
        assert saver.get_tuple(generate_config("new")) is None  # writes on no checkpoint
        assert ledger.sessions.get_by_key("new", app_name="langgraph").revision == 1
