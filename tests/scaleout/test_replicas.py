"""One ledger on a PostgreSQL primary and its hot standby (``readers=``): ledger-level
reads go to the standby, writes and units of work to the primary, ``ledger.primary``
reads what was just written, a record read stale from the standby conflicts when
written, a standby that cannot be reached hands its reads to the primary, and the
framework stores, the CLI and the viewer behave as documented.

Which server answered is seen, not guessed: the standby's replay is paused while a
test writes (``pg_wal_replay_pause``), so the standby still holds the state before
the write and the primary the state after it."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from io import StringIO
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url

from agentledger import AsyncLedger, ConflictError, Ledger, NewMessage, migrations
from agentledger.cli import main
from agentledger.models import VERSION_TABLE

from ..ports import free_port
from .conftest import Standby, _maintenance, read_on_each_node

pytestmark = pytest.mark.slow


@contextmanager
def replay_paused(standby: Standby) -> Iterator[None]:
    """The standby replays nothing in the block (it keeps serving reads); then it
    resumes and catches up."""
    with psycopg.connect(_maintenance(standby.standby), autocommit=True) as connection:
        connection.execute("SELECT pg_wal_replay_pause()")
        try:
            yield
        finally:
            connection.execute("SELECT pg_wal_replay_resume()")
    standby.caught_up()


def seeded_session(standby: Standby) -> str:
    """A new session with one message, written on the primary and replayed."""
    id = f"replica-{uuid.uuid4().hex[:8]}"
    with Ledger(standby.primary) as ledger:
        ledger.sessions.create(id, title="before")
        ledger.messages.append(id, NewMessage(role="user", content="replayed"))
    standby.caught_up()
    return id


def contents(messages: Any) -> list[str]:
    return [message.content for message in messages]


def test_reads_go_to_the_reader_and_writes_to_the_primary(standby: Standby) -> None:
    id = seeded_session(standby)
    with Ledger(standby.primary, readers=[standby.standby]) as ledger:
        with replay_paused(standby):
            ledger.messages.append(id, NewMessage(role="user", content="new"))
            assert contents(ledger.messages.all(id)) == ["replayed"]  # the standby's
            assert ledger.sessions.get(id).message_count == 1
            assert contents(ledger.primary.messages.all(id)) == ["replayed", "new"]
            with ledger.unit_of_work(readonly=True) as uow:  # units of work: the primary
                assert contents(uow.messages.all(id)) == ["replayed", "new"]
        assert contents(ledger.messages.all(id)) == ["replayed", "new"]


async def test_an_async_ledger_reads_from_the_reader_and_writes_to_the_primary(
    standby: Standby,
) -> None:
    id = seeded_session(standby)
    async with AsyncLedger(standby.primary, readers=[standby.standby]) as ledger:
        with replay_paused(standby):
            await ledger.messages.append(id, NewMessage(role="user", content="new"))
            assert contents(await ledger.messages.all(id)) == ["replayed"]
            assert contents(await ledger.primary.messages.all(id)) == ["replayed", "new"]

            async def read(uow: Any) -> list[str]:
                return contents(await uow.messages.all(id))

            assert await ledger.run(read) == ["replayed", "new"]


def test_a_record_read_from_a_lagging_reader_and_written_is_a_conflict(
    standby: Standby,
) -> None:
    id = seeded_session(standby)
    with Ledger(standby.primary, readers=[standby.standby]) as ledger:
        with replay_paused(standby):
            ledger.primary.sessions.save(
                ledger.primary.sessions.get(id).model_copy(update={"title": "newer"})
            )
            stale = ledger.sessions.get(id)
            assert stale.title == "before"
            with pytest.raises(ConflictError) as raised:
                ledger.sessions.save(stale.model_copy(update={"title": "lost update"}))
            assert raised.value.reason == "stale"
        assert ledger.primary.sessions.get(id).title == "newer"


def test_an_export_reads_one_snapshot_of_the_reader(standby: Standby) -> None:
    with Ledger(standby.primary, readers=[standby.standby]) as ledger:
        with replay_paused(standby):
            id = f"exported-{uuid.uuid4().hex[:8]}"
            ledger.sessions.create(id)
            from_reader, from_primary = StringIO(), StringIO()
            ledger.transfer.export_jsonl(from_reader)
            ledger.primary.transfer.export_jsonl(from_primary)
        assert id not in from_reader.getvalue()
        assert id in from_primary.getvalue()


def test_a_reader_that_cannot_be_reached_rests_and_the_primary_answers(
    standby: Standby, caplog: pytest.LogCaptureFixture
) -> None:
    id = seeded_session(standby)
    dead = make_url(standby.standby).set(port=free_port())
    with Ledger(standby.primary, readers=[dead]) as ledger:
        with caplog.at_level(logging.WARNING, logger="agentledger.readers"):
            for _ in range(3):
                assert contents(ledger.messages.all(id)) == ["replayed"]
        warnings = [r for r in caplog.records if r.name == "agentledger.readers"]
        assert len(warnings) == 1
        assert "reader 0" in warnings[0].getMessage()


def test_a_dead_reader_beside_a_live_one_leaves_every_read_to_the_live_one(
    standby: Standby,
) -> None:
    id = seeded_session(standby)
    dead = make_url(standby.standby).set(port=free_port())
    readers = [dead, standby.standby]
    with Ledger(standby.primary, readers=readers) as ledger, replay_paused(standby):
        ledger.messages.append(id, NewMessage(role="user", content="new"))
        for _ in range(4):  # none of them from the primary, which has "new"
            assert contents(ledger.messages.all(id)) == ["replayed"]


def test_the_langgraph_saver_reads_its_own_writes_on_a_ledger_with_readers(
    standby: Standby,
) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    from agentledger.integrations.langgraph import LedgerSaver

    thread = f"thread-{uuid.uuid4().hex[:8]}"
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    with Ledger(standby.primary, readers=[standby.standby]) as ledger:
        saver = LedgerSaver(ledger)
        with replay_paused(standby):
            stored = saver.put(config, empty_checkpoint(), {"step": 1}, {})
            found = saver.get_tuple(config)
            assert found is not None
            assert (
                found.config["configurable"]["checkpoint_id"]
                == (stored["configurable"]["checkpoint_id"])
            )


async def test_the_adk_service_reads_its_own_writes_on_a_ledger_with_readers(
    standby: Standby,
) -> None:
    from agentledger.integrations.adk import LedgerSessionService

    async with AsyncLedger(standby.primary, readers=[standby.standby]) as ledger:
        service = LedgerSessionService(ledger)
        user = f"user-{uuid.uuid4().hex[:8]}"  # the standby's database is the run's
        with replay_paused(standby):
            made = await service.create_session(app_name="app", user_id=user)
            found = await service.get_session(app_name="app", user_id=user, session_id=made.id)
            assert found is not None and found.id == made.id


async def test_the_openai_session_reads_its_own_writes_on_a_ledger_with_readers(
    standby: Standby,
) -> None:
    from agentledger.integrations.openai_agents import LedgerSession

    async with AsyncLedger(standby.primary, readers=[standby.standby]) as ledger:
        session = LedgerSession(f"openai-{uuid.uuid4().hex[:8]}", ledger)
        with replay_paused(standby):
            await session.add_items([{"role": "user", "content": "hello"}])
            assert await session.get_items() == [{"role": "user", "content": "hello"}]


def test_the_cli_reads_from_a_reader(standby: Standby, capsys: pytest.CaptureFixture[str]) -> None:
    id = seeded_session(standby)
    with Ledger(standby.primary) as ledger, replay_paused(standby):
        ledger.messages.append(id, NewMessage(role="user", content="written-later"))
        command = ["sessions", "show", id, "--url", standby.primary, "--full"]
        assert main([*command, "--reader", standby.standby]) == 0
        from_reader = capsys.readouterr().out
        assert main(command) == 0
        from_primary = capsys.readouterr().out
    assert "replayed" in from_reader and "written-later" not in from_reader
    assert "written-later" in from_primary


def test_the_viewer_reads_from_a_reader(standby: Standby) -> None:
    from starlette.testclient import TestClient

    from agentledger.ui import create_app

    id = seeded_session(standby)
    app = create_app(standby.primary, readers=[standby.standby])
    with Ledger(standby.primary) as ledger, replay_paused(standby), TestClient(app) as client:
        ledger.sessions.save(ledger.sessions.get(id).model_copy(update={"title": "after"}))
        listed = client.get("/sessions.json").json()["sessions"]
        titles = {item["id"]: item["title"] for item in listed}
        assert titles[id] == "before"
    assert json.dumps(listed)  # the page's data is plain JSON


@contextmanager
def commits_wait_for_standbys(standby: Standby) -> Iterator[None]:
    """The primary names every standby synchronous (``synchronous_standby_names``), so
    a session at ``synchronous_commit = remote_apply`` is acknowledged once the standby
    has applied its commit; set back afterwards."""
    with psycopg.connect(_maintenance(standby.primary), autocommit=True) as connection:
        connection.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
        connection.execute("SELECT pg_reload_conf()")
        try:
            yield
        finally:
            connection.execute("ALTER SYSTEM RESET synchronous_standby_names")
            connection.execute("SELECT pg_reload_conf()")


def test_with_remote_apply_a_read_on_the_reader_sees_the_write_just_acknowledged(
    standby: Standby,
) -> None:
    id = seeded_session(standby)
    remote_apply = {"connect_args": {"options": "-c synchronous_commit=remote_apply"}}
    with (
        commits_wait_for_standbys(standby),
        Ledger(standby.primary, readers=[standby.standby], engine_options=remote_apply) as ledger,
    ):
        for turn in range(50):
            ledger.messages.append(id, NewMessage(role="user", content=f"turn {turn}"))
            assert contents(ledger.messages.all(id))[-1] == f"turn {turn}"


def statements_of(engine: Engine) -> list[str]:
    """The statements ``engine`` runs from now on, as a list that grows."""
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    return statements


def test_galera_nodes_as_readers_see_every_write_the_primary_node_acknowledged(
    node_urls: list[URL],
) -> None:
    migrations.upgrade(node_urls[0])
    with Ledger(node_urls[0], readers=node_urls[1:]) as ledger:  # read_your_writes: on
        ledger.sessions.create("on-node-1")
        for turn in range(40):
            ledger.messages.append("on-node-1", NewMessage(role="user", content=f"{turn}"))
            assert contents(ledger.messages.all("on-node-1"))[-1] == f"{turn}"


def test_galera_nodes_as_readers_take_the_reads_in_turn(node_urls: list[URL]) -> None:
    migrations.upgrade(node_urls[0])
    # The readers are engines of the test's own, which wait for no commit of the cluster
    # (a ledger's own do: read_your_writes): each node must have applied the migrations
    # before a reader's schema check reads them (a loaded CI host saw 0005 on one).
    applied = read_on_each_node(node_urls[1:], f"SELECT version_num FROM {VERSION_TABLE}")
    assert applied == [[(migrations.head(),)]] * 2
    readers = [create_engine(url) for url in node_urls[1:]]
    try:
        with Ledger(node_urls[0], readers=readers) as ledger:
            ledger.sessions.create("on-node-1")
            seen = [statements_of(reader) for reader in readers]
            for _ in range(10):
                ledger.sessions.get("on-node-1")
        reads = [
            [sql for sql in statements if "FROM agentledger_sessions" in sql] for statements in seen
        ]
        assert [len(each) for each in reads] == [5, 5]  # besides each reader's schema check
    finally:
        for reader in readers:
            reader.dispose()
