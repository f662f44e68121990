"""An AsyncLedger on a SQLite file runs each ledger-level call on a sync twin engine
(pysqlite) in one worker-thread hop; units of work, ``run``, borrowed engines and
in-memory stores stay on the AsyncEngine (aiosqlite)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event
from sqlalchemy.ext.asyncio import create_async_engine

from agentledger import (
    AsyncLedger,
    ConflictError,
    NewMessage,
    NewStep,
    SchemaError,
    UsageError,
    migrations,
)
from agentledger.engine import configure_sqlite_engine, create_async_engine_for, create_sqlite_twin

pytestmark = pytest.mark.sqlite

TWIN_THREAD = "agentledger-sqlite"


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/twin.db"
    migrations.upgrade(url)
    return url


def traced(engine: Engine) -> list[tuple[str, str, str]]:
    """(thread name, DBAPI module, statement) of each statement run on ``engine``."""
    seen: list[tuple[str, str, str]] = []

    def record(connection: Any, _cursor: Any, statement: str, *_: Any) -> None:
        module = type(connection.connection.dbapi_connection).__module__
        seen.append((threading.current_thread().name, module, statement))

    event.listen(engine, "before_cursor_execute", record)
    return seen


def twin_of(ledger: AsyncLedger) -> tuple[Engine, Any]:
    assert ledger._twin is not None and ledger._hop is not None
    return ledger._twin.engine, ledger._hop


async def test_each_ledger_level_call_is_one_hop_on_the_twin(url: str) -> None:
    async with AsyncLedger(url) as ledger:
        await ledger.sessions.create("s")  # first use: the schema check and probe
        _, hop = twin_of(ledger)
        seen = traced(ledger.engine.sync_engine)  # added after the twin was made
        before = hop.submitted
        session = await ledger.sessions.get("s")
        appended = await ledger.messages.append(session, NewMessage(role="user", content="a"))
        assert [m.content for m in await ledger.messages.last("s", 50)] == ["a"]
        with pytest.raises(ConflictError):  # a stale record: the same _perform refuses it
            await ledger.messages.append(session, NewMessage(role="user", content="b"))
        assert hop.submitted - before == 4
        assert appended.session.revision == session.revision + 1
    assert seen, "the listener on ledger.engine.sync_engine saw none of the twin's statements"
    assert {(thread.rpartition("_")[0], module) for thread, module, _ in seen} == {
        (TWIN_THREAD, "sqlite3")
    }
    # The engine's own BEGIN IMMEDIATE listener runs on the twin's connections too (the
    # stale append: its UPDATE, then whether the session still exists, in a second one);
    # messages.last is one statement, its own read transaction, with no BEGIN.
    begins = [statement for _, _, statement in seen if statement.startswith("BEGIN")]
    assert begins == ["BEGIN", "BEGIN IMMEDIATE", "BEGIN IMMEDIATE", "BEGIN IMMEDIATE"]


async def test_the_twin_joins_the_engines_statement_events_and_nothing_else(url: str) -> None:
    engine = create_async_engine_for(url)
    twin = create_sqlite_twin(engine)
    assert twin is not None
    try:
        on_engine = traced(engine.sync_engine)
        with twin.connect() as connection:
            connection.exec_driver_sql("SELECT 1")
        assert [statement for *_, statement in on_engine] == ["BEGIN", "SELECT 1"]
        # A listener on the twin itself is the twin's only.
        on_twin = traced(twin)
        async with engine.connect() as connection:
            await connection.exec_driver_sql("SELECT 2")
        with twin.connect() as connection:
            connection.exec_driver_sql("SELECT 3")
        assert [statement for *_, statement in on_twin] == ["BEGIN", "SELECT 3"]
        assert [statement for *_, statement in on_engine][-2:] == ["BEGIN", "SELECT 3"]
        # Pool events stay each pool's own.
        connects: list[object] = []
        event.listen(engine.sync_engine, "connect", lambda *_: connects.append(1))
        twin.dispose()
        with twin.connect() as connection:
            connection.exec_driver_sql("SELECT 4")
        assert connects == []
    finally:
        twin.dispose()
        await engine.dispose()


async def test_units_of_work_and_run_stay_on_the_async_engine(url: str) -> None:
    async with AsyncLedger(url) as ledger:
        await ledger.sessions.create("s")
        _, hop = twin_of(ledger)
        seen = traced(ledger.engine.sync_engine)
        before = hop.submitted
        async with ledger.unit_of_work() as uow:
            await uow.messages.append("s", NewMessage(role="user", content="in a unit"))

        async def step(uow: Any) -> None:
            await uow.steps.append("s", NewStep(kind="tool", name="t", input={}))

        await ledger.run(step)
        assert hop.submitted == before
    assert seen
    assert {module for _, module, _ in seen} == {"sqlalchemy.dialects.sqlite.aiosqlite"}
    assert {thread for thread, _, _ in seen} == {threading.current_thread().name}


async def test_a_ledger_level_call_inside_a_unit_of_work_of_the_task_is_refused(url: str) -> None:
    async with AsyncLedger(url) as ledger:
        await ledger.sessions.create("s")
        _, hop = twin_of(ledger)
        before = hop.submitted
        async with ledger.unit_of_work() as uow:
            await uow.messages.append("s", NewMessage(role="user", content="held"))
            with pytest.raises(UsageError, match="inside an open unit of work"):
                await ledger.messages.last("s", 5)
            with pytest.raises(UsageError, match="inside an open unit of work"):
                async for _ in ledger.steps.iterate("s"):
                    pass
        assert hop.submitted == before  # refused in the event loop, before any hop
        # Another task may call while the unit of work is open: it waits on the lock
        # in its thread (here it only reads, so it does not wait at all).
        async with ledger.unit_of_work() as uow:
            await uow.messages.append("s", NewMessage(role="user", content="later"))
            other = asyncio.create_task(ledger.messages.last("s", 5))
            assert [m.content for m in await other] == ["held"]
        assert [m.content for m in await ledger.messages.last("s", 5)] == ["held", "later"]


async def test_iterate_takes_items_by_the_chunk_in_each_hop(url: str) -> None:
    async with AsyncLedger(url) as ledger:
        await ledger.sessions.create("s")
        await ledger.steps.append(
            "s", [NewStep(kind="tool", name=f"t{n}", input={}) for n in range(5)]
        )
        _, hop = twin_of(ledger)
        before = hop.submitted
        hop.items_per_call = 3
        names = [step.name async for step in ledger.steps.iterate("s", batch=2)]
        assert names == [f"t{n}" for n in range(5)]
        # Items 0-2 (pages of 2 and 2, each its own read), then 3-4 (and the page of 1
        # that ends it), then the generator's close.
        assert hop.submitted - before == 3


async def test_close_disposes_both_engines_and_refuses_later_calls(url: str) -> None:
    ledger = AsyncLedger(url)
    await ledger.sessions.create("s")
    twin, hop = twin_of(ledger)
    twin.dispose()  # start counting from no connection
    opened: list[object] = []
    closed: list[object] = []
    event.listen(twin.pool, "connect", lambda *_: opened.append(1))
    event.listen(twin.pool, "close", lambda *_: closed.append(1))
    await asyncio.gather(*(ledger.sessions.get("s") for _ in range(6)))
    assert opened
    await ledger.close()
    assert len(closed) == len(opened)
    assert hop._executor._shutdown
    with pytest.raises(UsageError, match="closed"):
        await ledger.sessions.get("s")
    await ledger.close()  # twice is harmless


async def test_a_borrowed_engine_and_an_in_memory_store_have_no_twin(url: str) -> None:
    engine = create_async_engine(url.replace("sqlite:", "sqlite+aiosqlite:"))
    configure_sqlite_engine(engine)
    try:
        async with AsyncLedger(engine=engine) as borrowed:
            assert borrowed._twin is None
            seen = traced(engine.sync_engine)
            await borrowed.sessions.create("b")
            assert {module for _, module, _ in seen} == {"sqlalchemy.dialects.sqlite.aiosqlite"}
    finally:
        await engine.dispose()
    async with AsyncLedger.in_memory() as memory:
        assert memory._twin is None
        seen = traced(memory.engine.sync_engine)
        await memory.sessions.create("m")
        assert {module for _, module, _ in seen} == {"sqlalchemy.dialects.sqlite.aiosqlite"}


async def test_upgrade_makes_the_twin_check_the_schema_again(tmp_path: Path) -> None:
    async with AsyncLedger(f"sqlite:///{tmp_path}/fresh.db") as ledger:
        with pytest.raises(SchemaError):
            await ledger.sessions.create("s")
        await ledger.upgrade()
        assert (await ledger.sessions.create("s")).id == "s"
