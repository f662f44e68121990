"""The SQL a LangGraph read and write send: get_tuple is one statement on PostgreSQL
(whose reads run in AUTOCOMMIT, so one statement is one snapshot), and neither read
nor write grows with the thread's length."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_config
from sqlalchemy import event
from sqlalchemy.engine.interfaces import CacheStats

from agentledger.repositories.langgraph import LangGraphRepository
from agentledger.repositories.langgraph import repository as langgraph_repository

from ...contract._sql import starting, statements_during, work
from .conftest import SYNC_UNIT_ONLY, Saved, close, make_ledger, make_saver, settled

pytestmark = pytest.mark.native
"""Each asserts a statement or path of a fast path the portable profile turns off."""


async def _thread(saved: Saved, thread_id: str, length: int) -> dict[str, Any]:
    config = generate_config(thread_id)
    for step in range(length):
        checkpoint = generate_checkpoint(
            channel_values={"v": step}, channel_versions={"v": step + 1}
        )
        config = await saved.saver.aput(config, checkpoint, {"step": step}, {"v": step + 1})
        await saved.saver.aput_writes(config, [("v", step)], f"task-{step}")
    return config


def _sent(saved: Saved) -> Any:
    return statements_during(SimpleNamespace(ledger=saved.ledger))  # type: ignore[arg-type]


async def test_get_tuple_sends_as_many_statements_at_30_checkpoints_as_at_one(
    saved: Saved,
) -> None:
    await _thread(saved, "one", 1)
    await _thread(saved, "many", 30)
    counts = []
    for thread_id in ("one", "many"):
        with _sent(saved) as statements:
            found = await saved.saver.aget_tuple(generate_config(thread_id))
        assert found is not None and found.pending_writes
        counts.append(len(work(statements)))
    one_statement = saved.ledger.engine.dialect.name in ("postgresql", "sqlite")
    assert counts == ([1, 1] if one_statement else [2, 2])


@pytest.mark.api("sync")
async def test_get_tuple_in_a_read_only_unit_of_work_keeps_its_snapshot(saved: Saved) -> None:
    # A one-statement get skips SQLite's read BEGIN only in a ledger call of its own; in a
    # unit of work it is one statement of the unit's transaction, which sees one snapshot.
    if saved.mode == "async":
        pytest.skip(SYNC_UNIT_ONLY)
    config = await _thread(saved, "snap", 2)
    other = make_ledger(saved.mode, saved.reopen_url())
    try:
        writer = make_saver(saved.mode, other)
        with saved.ledger.unit_of_work(readonly=True) as uow:
            inside = LangGraphRepository(uow._work)
            first = inside.get("snap", "")
            checkpoint = generate_checkpoint(channel_values={"v": 7}, channel_versions={"v": 7})
            writer.put(config, checkpoint, {"step": 7}, {"v": 7})
            again = inside.get("snap", "")
    finally:
        await close(other)
    assert first is not None and again is not None
    assert again.checkpoint_id == first.checkpoint_id
    latest = saved.ledger.langgraph().get("snap", "")
    assert latest is not None and latest.checkpoint_id == checkpoint["id"]


async def test_put_on_an_existing_thread_sends_as_many_statements_at_30_checkpoints_as_at_one(
    saved: Saved,
) -> None:
    counts = []
    for thread_id, length in (("one", 1), ("many", 30)):
        config = await _thread(saved, thread_id, length)
        checkpoint = generate_checkpoint(channel_values={"v": 99}, channel_versions={"v": 99})
        with _sent(saved) as statements:
            await saved.saver.aput(config, checkpoint, {"step": 99}, {"v": 99})
        # The session's updated_at is set when over TOUCH_EVERY old (by the clock, not
        # the thread's length): that UPDATE is left out of the count.
        counts.append(len([sql for sql, _ in work(statements) if not _touch(sql)]))
    assert counts[0] == counts[1]
    if saved.ledger.engine.dialect.name == "postgresql":
        assert counts == [1, 1]  # the session found, values, checkpoint and touch at once


def _touch(sql: str) -> bool:
    return sql.lstrip().upper().startswith("UPDATE AGENTLEDGER_SESSIONS")


async def test_every_write_after_a_threads_first_is_served_by_sqlalchemys_compiled_cache(
    saved: Saved, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A multi-row VALUES statement has no cache key: SQLAlchemy compiled it again on
    # every call. (The listener sends every statement through SQLAlchemy, driver SQL
    # included, so each one shows how its compiled form was found.) Every write touches
    # the session's updated_at here, so the touch is compiled in the first thread's
    # writes too: it runs by the clock, and a slow first pass left its first run, a
    # cache miss, to the second.
    monkeypatch.setattr(langgraph_repository, "TOUCH_EVERY", timedelta(0))
    engine = saved.ledger.engine
    sync_engine = getattr(engine, "sync_engine", engine)
    found: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, sql: str, params: Any, context: Any, many: bool) -> None:
        if context is not None and context.compiled is not None:
            found.append((sql, context.cache_hit))

    event.listen(sync_engine, "before_cursor_execute", record)
    try:
        await _thread(saved, "cached", 2)
        found.clear()
        await _thread(saved, "cached", 3)
    finally:
        event.remove(sync_engine, "before_cursor_execute", record)
    inserts = [hit for sql, hit in found if sql.lstrip().upper().startswith(("INSERT", "WITH"))]
    assert inserts
    assert {hit for _, hit in found} == {CacheStats.CACHE_HIT}


def _stores(statements: list[tuple[str, Any]]) -> list[str]:
    """The statements that store LangGraph rows (PostgreSQL: each one ``WITH thread``)."""
    return [sql for sql, _ in work(statements) if "agentledger_langgraph" in sql]


def _creating(statements: list[tuple[str, Any]]) -> list[bool]:
    """For each statement storing LangGraph rows, whether it creates the session."""
    return ["INSERT INTO agentledger_sessions" in sql for sql in _stores(statements)]


async def _put_stores(saved: Saved, config: dict[str, Any]) -> tuple[dict[str, Any], list[bool]]:
    """A put of a new checkpoint at ``config``: its config, and ``_creating`` of what it
    sent."""
    checkpoint = generate_checkpoint(channel_values={"v": 9}, channel_versions={"v": 9})
    with _sent(saved) as statements:
        stored = await saved.saver.aput(config, checkpoint, {}, {"v": 9})
    return stored, _creating(statements)


def _postgresql_only(saved: Saved) -> None:
    if saved.ledger.engine.dialect.name != "postgresql":
        pytest.skip(
            "PostgreSQL only: it checks the write that finds a thread's session by its key "
            "in the same statement, which only PostgreSQL has"
        )


async def test_a_threads_first_put_on_postgresql_is_one_statement_creating_its_session(
    saved: Saved,
) -> None:
    # A root checkpoint without a parent opens its thread: the statement that inserts
    # the session and stores the rows from its RETURNING goes first, alone. Later
    # writes are the write by key alone.
    _postgresql_only(saved)
    with _sent(saved) as statements:
        await _thread(saved, "first", 1)
    assert all(sql.startswith("WITH thread AS") for sql in _stores(statements))
    assert _creating(statements) == [True, False]  # the first put, the put_writes after it
    plain = starting(
        work(statements), "INSERT INTO AGENTLEDGER_SESSIONS", "INSERT INTO AGENTLEDGER_LANGGRAPH"
    )
    assert plain == []


async def test_a_root_put_without_a_parent_on_a_stored_thread_stores_in_it_by_key(
    saved: Saved,
) -> None:
    # The guess that a parentless root checkpoint opens its thread is wrong here: the
    # session's INSERT meets the stored key and stores nothing; the write by key after
    # it stores the checkpoint in the thread's own session.
    _postgresql_only(saved)
    await _thread(saved, "stored", 1)
    config, creating = await _put_stores(saved, generate_config("stored"))
    assert creating == [True, False]
    sessions = await settled(saved.ledger.sessions.list(app_name="langgraph"))
    assert len(sessions.items) == 1
    found = await saved.saver.aget_tuple(generate_config("stored"))
    assert found is not None and found.config == config


async def test_a_subgraphs_first_put_on_postgresql_is_the_write_by_key_alone(
    saved: Saved,
) -> None:
    # A checkpoint in a namespace of its own belongs to a thread its root graph
    # already stored: its first put, without a parent, goes by the session's key.
    _postgresql_only(saved)
    await _thread(saved, "parent", 1)
    _, creating = await _put_stores(saved, generate_config("parent", checkpoint_ns="child:1"))
    assert creating == [False]


async def test_a_write_by_key_finding_no_thread_creates_it_in_one_more_statement(
    saved: Saved,
) -> None:
    # Pending writes on a thread never put: the write by key finds no session and
    # writes nothing; the statement creating the session and storing them follows.
    _postgresql_only(saved)
    config = generate_config("unknown", checkpoint_id="1")
    with _sent(saved) as statements:
        await saved.saver.aput_writes(config, [("v", 1)], "task")
    assert _creating(statements) == [False, True]
    assert await settled(saved.ledger.sessions.get_by_key("unknown", app_name="langgraph"))
