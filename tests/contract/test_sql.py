"""agentledger's own SQL, which the contract suite cannot see from the public API:
nothing is sent before validation, statement counts stay flat, no row is left behind,
and the latest-checkpoint query uses its index on PostgreSQL.

These tests reach the ledger's engine, so they live here rather than in
``agentledger.testing``; they take the contract's ``harness`` fixture and so run on
the targets of their tier (tests/backends.py).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Connection, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from agentledger import (
    AgentCheckpoint,
    AgentSession,
    DatabaseError,
    InvalidIdError,
    Limits,
    NewMessage,
    NewStep,
    NotFoundError,
    UsageError,
    ValidationError,
    metadata,
)
from agentledger.ids import new_id
from agentledger.models import AgentLangGraphBlob, AgentLangGraphCheckpoint, AgentLangGraphWrite
from agentledger.repositories import _base
from agentledger.testing import Harness, tier
from agentledger.testing.checkpoints import (
    EMPTY,
    GARBAGE_REF_IDS,
    GARBAGE_REFS,
    HOUR,
    SettableClock,
    json_size,
    refuse_as_invalid_ids,
    sized,
    state,
)
from agentledger.testing.sessions import BAD_IDS

from ._sql import on_engine, starting, statements_during, work


async def _warmed(harness: Harness) -> None:
    """Make the ledger ready (an in-memory store migrates on first use), so that what
    follows is the operation's own SQL."""
    await harness.ledger.sessions.exists("warm-up")


@pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
@tier("logic")
async def test_an_invalid_session_id_is_refused_before_any_sql(harness: Harness, bad: str) -> None:
    await _warmed(harness)
    with statements_during(harness) as statements:
        with pytest.raises(InvalidIdError):
            await harness.ledger.sessions.create(bad)
        with pytest.raises(InvalidIdError):
            await harness.ledger.sessions.get(bad)
    assert work(statements) == []


@pytest.mark.parametrize("garbage", GARBAGE_REFS, ids=GARBAGE_REF_IDS)
@tier("logic")
async def test_a_garbage_checkpoint_ref_is_refused_before_any_sql(
    harness: Harness, garbage: Any
) -> None:
    await harness.ledger.sessions.create("run")
    with statements_during(harness) as statements:
        await refuse_as_invalid_ids(harness.ledger, "run", garbage)
    assert work(statements) == []


@tier("logic")
async def test_a_checkpoint_over_the_size_limit_is_refused_before_any_sql(
    harness: Harness,
) -> None:
    limit = 2000
    async with harness.require("configured")(limits=Limits(max_checkpoint_bytes=limit)) as ledger:
        await ledger.sessions.create("run")
        with statements_during(harness) as statements, pytest.raises(ValidationError):
            await ledger.checkpoints.save("run", sized(limit + 1))
    assert work(statements) == []


async def test_a_listing_page_is_one_select_whatever_its_size(harness: Harness) -> None:
    for index in range(30):
        await harness.ledger.sessions.create(f"s-{index}", user_id="s")
    for limit in (1, 10, 30):
        with statements_during(harness) as statements:
            await harness.ledger.sessions.list(limit=limit, user_id="s")
        assert len(starting(statements, "SELECT")) == 1


async def test_appending_a_message_costs_the_same_statements_at_10_and_10000_messages(
    harness: Harness,
) -> None:
    async def statements_for_one_append(id: str, existing: int) -> int:
        record = await harness.ledger.sessions.create(id)
        for start in range(0, existing, 2000):
            batch = [
                NewMessage(role="user", content=f"m{i}")
                for i in range(start, min(existing, start + 2000))
            ]
            record = (await harness.ledger.messages.append(record, batch)).session
        with statements_during(harness) as seen:
            await harness.ledger.messages.append(record, NewMessage(role="user", content="more"))
        return len(seen) - len(starting(seen, "BEGIN", "COMMIT"))

    small = await statements_for_one_append("small", 10)
    large = await statements_for_one_append("large", 10_000)
    assert small == large <= 3


async def test_iterate_reads_steps_in_one_select_per_batch(harness: Harness) -> None:
    await harness.ledger.sessions.create("batched")
    await harness.ledger.steps.append("batched", [NewStep(step_index=i) for i in range(10)])
    with statements_during(harness) as statements:
        assert len([s async for s in harness.ledger.steps.iterate("batched", batch=4)]) == 10
    assert len(starting(statements, "SELECT")) == 3


async def test_a_batch_of_steps_is_one_insert(harness: Harness) -> None:
    await harness.ledger.sessions.create("bulk")
    with statements_during(harness) as statements:
        await harness.ledger.steps.append("bulk", [NewStep(step_index=i) for i in range(100)])
    assert len(starting(statements, "INSERT")) == 1
    assert await harness.ledger.steps.count("bulk") == 100


async def test_purge_expired_deletes_in_batches_of_the_given_size(harness: Harness) -> None:
    clock = SettableClock()
    async with harness.require("configured")(clock=clock) as ledger:
        await ledger.sessions.create("run")
        for i in range(7):
            await ledger.checkpoints.save("run", state(i), ttl=HOUR)
        await ledger.checkpoints.save("run", state("kept"))
        clock.advance(2 * HOUR)
        with statements_during(harness) as statements:
            assert await ledger.checkpoints.purge_expired(batch=3) == 7
    assert len(starting(statements, "DELETE")) == 3


async def test_latest_checkpoint_is_one_statement_with_2000_checkpoints_as_with_one(
    harness: Harness,
) -> None:
    newest = await _session_with_2000_checkpoints(harness, "many")
    await harness.ledger.sessions.create("one")
    await harness.ledger.checkpoints.save("one", state(1))
    counts = []
    for id in ("one", "many"):
        with statements_during(harness) as statements:
            latest = await harness.ledger.checkpoints.latest(id)
        assert latest is not None
        counts.append(len(work(statements)))
    assert counts == [1, 1]
    assert latest == newest


async def test_latest_checkpoint_reads_the_seq_index_on_postgresql(harness: Harness) -> None:
    if harness.ledger.engine.dialect.name != "postgresql":
        pytest.skip("the plan is checked only on PostgreSQL (EXPLAIN differs by dialect)")
    await _session_with_2000_checkpoints(harness, "many")
    with statements_during(harness) as statements:
        await harness.ledger.checkpoints.latest("many")
    ((sql, parameters),) = work(statements)

    def explain(connection: Connection) -> str:
        connection.exec_driver_sql("ANALYZE agentledger_checkpoints")
        rows = connection.exec_driver_sql("EXPLAIN " + sql, parameters).all()
        return "\n".join(str(row[0]) for row in rows)

    plan = await on_engine(harness, explain)
    assert "uq_agentledger_checkpoints_session_id_seq" in plan, plan
    assert "Seq Scan" not in plan and "Sort" not in plan, plan


async def test_delete_removes_the_session_and_its_rows_in_every_table(harness: Harness) -> None:
    await harness.ledger.sessions.create("doomed")
    await harness.ledger.sessions.create("kept")
    for id in ("doomed", "kept"):
        await harness.ledger.messages.append(id, NewMessage(role="user", content="hi"))
        await harness.ledger.steps.append(id, NewStep(kind="model"))
        await harness.ledger.grants.grant(id, "tool:x")
        await harness.ledger.checkpoints.save(id, EMPTY)
        await on_engine(harness, lambda c, id=id: _langgraph_rows(c, id))
    await harness.ledger.sessions.delete("doomed")
    assert await on_engine(harness, lambda c: _rows_of(c, "doomed")) == dict.fromkeys(_TABLES, 0)
    assert await on_engine(harness, lambda c: _rows_of(c, "kept")) == dict.fromkeys(_TABLES, 1)


_SESSION_TABLES = [
    table
    for table in metadata.sorted_tables
    if "session_id" in table.c or table.name == "agentledger_sessions"
]
"""The session table and every table of a session's rows (scoped state is no session's)."""
_TABLES = [table.name for table in _SESSION_TABLES]


def _langgraph_rows(connection: Connection, id: str) -> None:
    """One row of each LangGraph table on session ``id`` (a thread's checkpoint, channel
    value and pending write)."""
    place = {"session_id": id, "checkpoint_ns": ""}
    connection.execute(
        insert(AgentLangGraphCheckpoint.__table__),
        {
            **place,
            "checkpoint_id": "c1",
            "type": "msgpack",
            "checkpoint": b"\x00",
            "channel_versions": {},
            "metadata": {},
            "created_at": datetime.now(UTC),
        },
    )
    connection.execute(
        insert(AgentLangGraphBlob.__table__),
        {**place, "channel": "a", "version": "1", "type": "msgpack", "blob": b"\x01"},
    )
    connection.execute(
        insert(AgentLangGraphWrite.__table__),
        {
            **place,
            "checkpoint_id": "c1",
            "task_id": "t",
            "idx": 0,
            "channel": "a",
            "type": "msgpack",
            "blob": b"\x02",
            "task_path": "",
        },
    )


def _rows_of(connection: Connection, id: str) -> dict[str, int]:
    """How many rows of session ``id`` each of agentledger's tables holds."""
    counts = {}
    for table in _SESSION_TABLES:
        key = table.c.session_id if "session_id" in table.c else table.c.id
        counts[table.name] = connection.scalar(
            select(func.count()).select_from(table).where(key == id)
        )
    return counts


async def _session_with_2000_checkpoints(harness: Harness, id: str) -> Any:
    """A session ``id`` whose 1999 oldest checkpoints are written straight into the
    table (2000 saves would be slow), then one saved: the newest, returned."""
    await harness.ledger.sessions.create(id)
    now = datetime.now(UTC)
    refs = [new_id(now) for _ in range(1999)]
    rows = [
        {
            "ref": ref,
            "session_id": id,
            "seq": seq,
            "parent_ref": refs[seq - 2] if seq > 1 else None,
            "created_at": now,
            "expires_at": None,
            "size": json_size(state("bulk")),
            "payload": state("bulk").model_dump(),
        }
        for seq, ref in enumerate(refs, start=1)
    ]
    pointer = (
        update(AgentSession)
        .where(AgentSession.id == id)
        .values(checkpoint_seq=len(refs), latest_checkpoint_ref=refs[-1])
    )

    def write(connection: Connection) -> None:
        connection.execute(insert(AgentCheckpoint), rows)
        connection.execute(pointer)

    await on_engine(harness, write)
    newest = await harness.ledger.checkpoints.save(id, state("newest"))
    assert newest.seq == 2000
    return newest


@tier("logic")
async def test_a_write_in_a_read_only_unit_of_work_sends_no_sql(harness: Harness) -> None:
    await harness.ledger.sessions.create("ro")
    async with harness.ledger.unit_of_work(readonly=True) as uow:
        await uow.sessions.get("ro")
        with statements_during(harness) as seen:
            with pytest.raises(UsageError):
                await uow.sessions.create("nope")
            with pytest.raises(UsageError):
                await uow.app_state.merge("app", {"set": {"k": 1}})
        assert seen == []


@tier("logic")
async def test_a_unit_of_work_that_fails_to_begin_gives_its_connection_back(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(connection: Connection) -> None:
        connection.exec_driver_sql("SELECT 1")  # the transaction has begun, then fails
        raise DatabaseError("the server refused the snapshot")

    monkeypatch.setattr(_base, "begin_snapshot", refused)
    engine = harness.ledger.engine
    pool = (engine.sync_engine if isinstance(engine, AsyncEngine) else engine).pool
    for _ in range(2):
        with pytest.raises(DatabaseError, match="refused the snapshot"):
            async with harness.ledger.unit_of_work(readonly=True):
                pass
        assert pool.checkedout() == 0  # type: ignore[attr-defined]


@tier("dialect")
@pytest.mark.databases("sqlite")
async def test_a_read_of_one_statement_on_sqlite_sends_no_begin(harness: Harness) -> None:
    # One statement in the driver's autocommit is its own read transaction: one snapshot.
    await harness.ledger.sessions.create("read")
    await harness.ledger.messages.append("read", NewMessage(role="user", content="hi"))
    await harness.ledger.steps.append("read", [NewStep(step_index=0)])
    with statements_during(harness) as statements:
        assert [m.content for m in await harness.ledger.messages.all("read")] == ["hi"]
        assert len(await harness.ledger.messages.last("read", 5)) == 1
        assert len(await harness.ledger.steps.window("read")) == 1
    assert starting(statements, "BEGIN") == []
    assert len(starting(statements, "SELECT")) == 3
    with pytest.raises(NotFoundError):  # nothing found: a second look, at the session row
        await harness.ledger.messages.all("never")


@tier("driver")
async def test_an_empty_answer_tells_a_missing_session_from_an_empty_one(
    harness: Harness,
) -> None:
    await harness.ledger.sessions.create("empty")
    assert await harness.ledger.messages.all("empty") == []
    assert await harness.ledger.messages.last("empty", 3) == []
    with pytest.raises(NotFoundError):
        await harness.ledger.messages.all("missing")
    with pytest.raises(NotFoundError):
        await harness.ledger.messages.window("missing")
