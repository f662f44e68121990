"""A LangGraph thread is an agentledger session: listed, deleted with every row, purged
by age unless a saver wrote it since, and carried by export, import and copy."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.conformance.test_utils import (
    generate_checkpoint,
    generate_config,
    generate_metadata,
)
from sqlalchemy import create_engine, delete, func, select

from agentledger import ConflictError, Ledger
from agentledger._dialects import capabilities
from agentledger.integrations import framework_of
from agentledger.integrations.langgraph import LedgerSaver
from agentledger.models import (
    AgentLangGraphBlob,
    AgentLangGraphCheckpoint,
    AgentLangGraphWrite,
    AgentSession,
)
from agentledger.repositories.langgraph import TOUCH_EVERY
from agentledger.repositories.langgraph import repository as langgraph_repository
from agentledger.repositories.sessions import keyed_session_id
from agentledger.retention import PurgePolicy

from ...databases import dialect_params, scratch_database
from .conftest import SYNC_UNIT_ONLY, Saved, settled

TABLES = (AgentLangGraphCheckpoint, AgentLangGraphBlob, AgentLangGraphWrite)


async def _thread_with_writes(saver: Any, thread_id: str) -> dict[str, Any]:
    """Two checkpoints (one channel changed between them) and a pending write."""
    values = {"messages": ["hi"], "big": b"\x00\xff" * 1000}
    first = await saver.aput(
        generate_config(thread_id),
        generate_checkpoint(channel_values=values, channel_versions={"messages": 1, "big": 1}),
        generate_metadata(step=0),
        {"messages": 1, "big": 1},
    )
    second_config = generate_config(thread_id, checkpoint_id=first["configurable"]["checkpoint_id"])
    values = {"messages": ["hi", "there"], "big": b"\x00\xff" * 1000}
    second = await saver.aput(
        second_config,
        generate_checkpoint(channel_values=values, channel_versions={"messages": 2, "big": 1}),
        generate_metadata(step=1),
        {"messages": 2},
    )
    await saver.aput_writes(second, [("messages", ["next"])], "task-1", "path")
    return second


def _counts(ledger: Ledger) -> list[int]:
    with ledger.unit_of_work(readonly=True) as uow:
        return [
            uow.session.execute(select(func.count()).select_from(table)).scalar_one()
            for table in TABLES
        ]


@contextmanager
def _clocked_saver(
    database: str, tmp_path: Path
) -> Iterator[tuple[Ledger, LedgerSaver, list[datetime]]]:
    """A saver on a scratch database whose ledger's clock reads ``now[0]``: the ledger,
    the saver and ``now``, to move the clock."""
    now = [datetime(2026, 12, 1, 12, 0, tzinfo=UTC)]
    with (
        scratch_database(database, str(tmp_path)) as url,
        Ledger(url, clock=lambda: now[0]) as ledger,
    ):
        ledger.upgrade()
        yield ledger, LedgerSaver(ledger), now


@pytest.mark.parametrize("database", dialect_params())
async def test_a_purge_by_age_removes_an_idle_thread_whole_and_keeps_one_a_saver_wrote_since(
    database: str, tmp_path: Path
) -> None:
    with _clocked_saver(database, tmp_path) as (ledger, saver, now):
        await _thread_with_writes(saver, "idle")
        active = await _thread_with_writes(saver, "active")
        now[0] += timedelta(days=40)
        saver.put_writes(active, [("messages", ["later"])], "task-2")

        done = ledger.retention.purge(PurgePolicy(older_than=timedelta(days=30)))

        (kept,) = ledger.sessions.list(app_name="langgraph", include=["external_key"]).items
        assert done.sessions == 1 and kept.external_key == "active"
        assert _counts(ledger) == [2, 3, 2]  # the active thread's rows, none of the idle one's
        assert saver.get_tuple(generate_config("idle")) is None
        assert saver.get_tuple(generate_config("active")) is not None


async def test_a_thread_is_a_langgraph_session_storing_unchanged_channels_once(
    saved: Saved, tmp_path: Path
) -> None:
    await _thread_with_writes(saved.saver, "thread-1")

    page = await settled(saved.ledger.sessions.list(app_name="langgraph", include=["external_key"]))

    (item,) = page.items
    assert item.external_key == "thread-1" and framework_of(item.id) == "langgraph"
    counts = await settled(saved.ledger.transfer.export_jsonl(tmp_path / "export.jsonl"))
    assert counts.rows["langgraph_checkpoints"] == 2
    assert counts.rows["langgraph_blobs"] == 3  # messages twice, big once
    assert counts.rows["langgraph_writes"] == 1


async def test_deleting_the_session_deletes_every_row_of_the_thread(
    saved: Saved, tmp_path: Path
) -> None:
    await _thread_with_writes(saved.saver, "thread-1")
    session = await settled(saved.ledger.sessions.get_by_key("thread-1", app_name="langgraph"))

    await settled(saved.ledger.sessions.delete(session.id))

    assert await saved.saver.aget_tuple(generate_config("thread-1")) is None
    report = await settled(saved.ledger.transfer.export_jsonl(tmp_path / "export.jsonl"))
    assert [report.rows[f"langgraph_{kind}s"] for kind in ("checkpoint", "blob", "write")] == [
        0,
        0,
        0,
    ]


async def test_export_and_import_carry_the_thread_to_another_database(
    saved: Saved, tmp_path: Path
) -> None:
    latest = await _thread_with_writes(saved.saver, "thread-1")
    before = await saved.saver.aget_tuple(latest)
    file = tmp_path / "export.jsonl"
    await settled(saved.ledger.transfer.export_jsonl(file))

    with Ledger(f"sqlite:///{tmp_path / 'target.db'}") as target:
        target.upgrade()
        imported = target.transfer.import_jsonl(file)
        again = target.transfer.import_jsonl(file)
        after = LedgerSaver(target).get_tuple(latest)
        assert _counts(target) == [2, 3, 1]

    assert imported.tables["langgraph_blobs"].inserted == 3
    assert again.tables["langgraph_writes"].unchanged == 1
    assert before is not None and after is not None
    assert after.checkpoint == before.checkpoint
    assert after.pending_writes == before.pending_writes == [("task-1", "messages", ["next"])]
    assert after.parent_config == before.parent_config


@pytest.mark.parametrize(
    "database",
    [
        pytest.param("sqlite", marks=pytest.mark.sqlite),
        # PostgreSQL's write is one statement whose CTE moves updated_at.
        pytest.param("postgresql", marks=pytest.mark.postgresql),
    ],
)
@pytest.mark.parametrize("write", ["put", "put_writes"])
def test_a_write_sets_the_threads_updated_at_when_over_a_second_old(
    database: str, write: str, tmp_path: Path
) -> None:
    with _clocked_saver(database, tmp_path) as (ledger, saver, now):
        config = generate_config("touched")
        checkpoint = generate_checkpoint(channel_values={"v": 1}, channel_versions={"v": 1})
        stored = saver.put(config, checkpoint, generate_metadata(step=0), {"v": 1})
        started = now[0]
        seen = []
        for step, later in enumerate(
            (timedelta(milliseconds=500), TOUCH_EVERY + timedelta(seconds=1))
        ):
            now[0] = started + later
            if write == "put":
                following = generate_checkpoint(
                    channel_values={"v": step + 2}, channel_versions={"v": step + 2}
                )
                saver.put(stored, following, generate_metadata(step=step + 1), {"v": step + 2})
            else:
                saver.put_writes(stored, [("v", 2)], f"task-{later}")
            (session,) = ledger.sessions.list(app_name="langgraph").items
            seen.append(session.updated_at)
    assert seen == [started, started + TOUCH_EVERY + timedelta(seconds=1)]


def _sync_unit(saved: Saved) -> Any:
    if not isinstance(saved.ledger, Ledger):
        pytest.skip(SYNC_UNIT_ONLY)
    return saved.ledger.unit_of_work()


@pytest.mark.api("sync")
async def test_a_threads_session_created_by_another_writer_after_the_look_up_is_the_one_used(
    saved: Saved,
) -> None:
    # Two first writers of one thread both find no session; the second one's INSERT
    # finds the first one's key stored and looks the key up again.
    unit = _sync_unit(saved)
    theirs, _ = saved.ledger.sessions.get_or_create_by_key("raced", app_name="langgraph")
    looked_up: list[str | None] = []

    def find() -> str | None:
        looked_up.append(theirs.id)
        return theirs.id

    with unit as uow:
        found = keyed_session_id(
            uow._work, "raced", app_name="langgraph", user_id=None, id="mine", find=find
        )
    assert found == theirs.id
    assert saved.ledger.sessions.get_or_none("mine") is None
    # With ON CONFLICT (PostgreSQL, SQLite) the INSERT does nothing and the key is looked
    # up again; elsewhere (MariaDB/MySQL, the portable profile) the creation goes through
    # get_or_create_by_key, its own look-up.
    on_conflict = capabilities(saved.ledger.engine.dialect).upsert == "on_conflict"
    assert looked_up == ([theirs.id] if on_conflict else [])


@pytest.mark.api("sync")
async def test_a_threads_new_session_whose_id_is_taken_is_a_conflict_and_stores_nothing(
    saved: Saved,
) -> None:
    unit = _sync_unit(saved)
    saved.ledger.sessions.create(id="taken")
    with pytest.raises(ConflictError) as raised, unit as uow:
        keyed_session_id(
            uow._work, "new", app_name="langgraph", user_id=None, id="taken", find=lambda: None
        )
    assert raised.value.reason == "exists"
    assert saved.ledger.sessions.get_by_key_or_none("new", app_name="langgraph") is None
    assert saved.ledger.sessions.get("taken").external_key is None


async def test_a_threads_session_is_stored_as_the_sessions_api_stores_a_keyed_one(
    saved: Saved,
) -> None:
    # A thread's first put builds its session's row for a Core INSERT
    # (``new_keyed_session``), not through the ORM: every column must still come out
    # as the ORM's create by key stores it.
    await _first_put(saved, "thread")
    ours = await settled(saved.ledger.sessions.get_by_key("thread", app_name="langgraph"))
    theirs, _ = await settled(
        saved.ledger.sessions.get_or_create_by_key("other", app_name="langgraph")
    )
    differ = {"id", "external_key", "created_at", "updated_at"}
    assert ours.model_dump(exclude=differ) == theirs.model_dump(exclude=differ)
    assert ours.created_at == ours.updated_at


def _first_put(saved: Saved, thread_id: str) -> Any:
    checkpoint = generate_checkpoint(channel_values={"v": 1}, channel_versions={"v": 1})
    return saved.saver.aput(generate_config(thread_id), checkpoint, {"step": 0}, {"v": 1})


@pytest.mark.native
@pytest.mark.api("sync")
async def test_a_first_put_whose_thread_another_writer_created_meanwhile_stores_in_theirs(
    saved: Saved, monkeypatch: pytest.MonkeyPatch
) -> None:
    # PostgreSQL: a thread's first put (a root checkpoint without a parent) creates
    # its session first; another writer created it just before: that statement stores
    # nothing, and the write by key runs, into theirs.
    if saved.ledger.engine.dialect.name != "postgresql" or not isinstance(saved.ledger, Ledger):
        pytest.skip(
            "PostgreSQL and the sync API only: it races two writers creating one thread's "
            "session, which only PostgreSQL does in the same statement as the write"
        )
    theirs: list[str] = []
    outcomes: list[bool | None] = []
    original = langgraph_repository.insert_for_new_session

    def raced(connection: Any, *args: Any) -> bool | None:
        with Ledger(saved.reopen_url()) as other:
            session, _ = other.sessions.get_or_create_by_key("raced", app_name="langgraph")
        theirs.append(session.id)
        created = original(connection, *args)
        outcomes.append(created)
        return created

    monkeypatch.setattr(langgraph_repository, "insert_for_new_session", raced)
    stored = await _first_put(saved, "raced")
    sessions = saved.ledger.sessions.list(app_name="langgraph").items
    assert [session.id for session in sessions] == theirs and outcomes == [False]
    found = await saved.saver.aget_tuple(generate_config("raced"))
    assert found is not None
    assert found.checkpoint["id"] == stored["configurable"]["checkpoint_id"]


async def test_a_first_put_whose_new_session_id_is_taken_is_a_conflict_and_stores_nothing(
    saved: Saved, monkeypatch: pytest.MonkeyPatch
) -> None:
    await settled(saved.ledger.sessions.create(id="taken"))
    monkeypatch.setattr(langgraph_repository, "new_session_id", lambda *args: "taken")
    with pytest.raises(ConflictError) as raised:
        await _first_put(saved, "new")
    assert raised.value.reason == "exists"
    assert await saved.saver.aget_tuple(generate_config("new")) is None
    assert (await settled(saved.ledger.sessions.get("taken"))).external_key is None


@pytest.mark.api("sync")
@pytest.mark.parametrize("transport", ["default", "sqlalchemy"])
@pytest.mark.parametrize("write", ["put_writes", "put"])
async def test_a_write_racing_a_delete_of_its_thread_waits_and_lands_in_a_new_thread(
    saved: Saved, write: str, transport: str
) -> None:
    # The delete is begun, and its session row locked, before the write starts: the write
    # waits for it, then finds no session and creates one, rather than failing. By
    # default a PostgreSQL ledger's write is driver SQL's one statement, which reads the
    # session unlocked; on SQLAlchemy's transport (driver_sql=False) it is a transaction
    # that reads it FOR KEY SHARE.
    if not isinstance(saved.ledger, Ledger):
        pytest.skip(SYNC_UNIT_ONLY)
    stored = await _first_put(saved, "doomed")
    doomed = saved.ledger.sessions.get_by_key("doomed", app_name="langgraph")
    writer_ledger = saved.ledger
    if transport == "sqlalchemy":
        writer_ledger = Ledger(saved.reopen_url(), driver_sql=False)
    saver = LedgerSaver(writer_ledger)
    deleter = create_engine(saved.reopen_url())
    outcome: list[BaseException | None] = []

    def write_now() -> None:
        try:
            if write == "put_writes":
                saver.put_writes(stored, [("v", 2)], "task-after")
            else:
                following = generate_checkpoint(channel_values={"v": 2}, channel_versions={"v": 2})
                saver.put(stored, following, generate_metadata(step=1), {"v": 2})
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)

    try:
        with deleter.begin() as connection:
            connection.execute(delete(AgentSession).where(AgentSession.id == doomed.id))
            writer = threading.Thread(target=write_now, daemon=True)
            writer.start()
            writer.join(0.5)
            assert writer.is_alive()  # waiting for the delete's lock
        writer.join(30)  # a write still waiting then fails the test below
    finally:
        deleter.dispose()
        if writer_ledger is not saved.ledger:
            writer_ledger.close()
    assert outcome == [None]
    found = saved.ledger.sessions.get_by_key("doomed", app_name="langgraph")
    assert found.id != doomed.id
    table = AgentLangGraphWrite if write == "put_writes" else AgentLangGraphCheckpoint
    with saved.ledger.unit_of_work(readonly=True) as uow:
        rows = uow.session.execute(select(table).where(table.session_id == found.id)).all()
    assert len(rows) == 1
