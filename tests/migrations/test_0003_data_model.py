"""Revision 0003 (keys, scoped state, message time): rows and revisions kept both ways."""

from __future__ import annotations

from sqlalchemy import create_engine, inspect, select
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger import Ledger, NewMessage, migrations
from agentledger.models import metadata

from ._support import COLUMNS_0003, drift, insert_legacy_rows, legacy_rows

NEW_TABLES = {"agentledger_app_state", "agentledger_user_state"}


def _tables(url: URL) -> set[str]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _new_columns(url: URL) -> list[tuple[object, ...]]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            sessions = metadata.tables["agentledger_sessions"]
            columns = [sessions.c[name] for name in sorted(COLUMNS_0003)]
            return [tuple(row) for row in connection.execute(select(*columns))]
    finally:
        engine.dispose()


def test_upgrading_a_populated_0002_database_keeps_every_row_and_revision(
    scratch_url: URL,
) -> None:
    migrations.upgrade(scratch_url, "agentledger_0002")
    insert_legacy_rows(scratch_url)
    before = legacy_rows(scratch_url)

    migrations.upgrade(scratch_url)

    assert migrations.current(scratch_url) == migrations.head()
    assert legacy_rows(scratch_url) == before
    assert _new_columns(scratch_url) == [(None, None), (None, None)]
    assert _tables(scratch_url) >= NEW_TABLES
    assert drift(scratch_url) == []
    with Ledger(scratch_url) as ledger:
        assert ledger.sessions.get("s1").revision == 7
        appended = ledger.messages.append("s1", NewMessage(role="user", content="after"))
        assert appended.session.revision == 8
        assert [m.seq for m in appended.messages] == [3]


def test_downgrading_to_0002_and_upgrading_again_round_trips(scratch_url: URL) -> None:
    migrations.upgrade(scratch_url, "agentledger_0002")
    insert_legacy_rows(scratch_url)
    before = legacy_rows(scratch_url)
    migrations.upgrade(scratch_url)

    migrations.downgrade(scratch_url, "agentledger_0002")

    assert migrations.current(scratch_url) == "agentledger_0002"
    assert legacy_rows(scratch_url) == before
    assert not NEW_TABLES & _tables(scratch_url)

    migrations.upgrade(scratch_url)

    assert legacy_rows(scratch_url) == before
    assert drift(scratch_url) == []


def test_keyed_sessions_scoped_state_and_message_keys_work_after_the_upgrade(
    scratch_url: URL,
) -> None:
    migrations.upgrade(scratch_url, "agentledger_0002")
    insert_legacy_rows(scratch_url)
    migrations.upgrade(scratch_url)

    with Ledger(scratch_url) as ledger:
        session = ledger.sessions.create(
            external_key="thread-" + "é" * 1000, app_name="a" * 255, user_id="ana@example.com"
        )
        found = ledger.sessions.get_by_key(
            session.external_key or "", app_name="a" * 255, user_id="ana@example.com"
        )
        assert found.id == session.id
        merged = ledger.app_state.merge("a" * 255, {"set": {"theme": "dark"}})
        assert (merged.revision, merged.state) == (1, {"theme": "dark"})
        keyed = NewMessage(role="agent " * 40, content="x", external_key="k" * 255)
        assert ledger.messages.append(session, keyed).messages[0].seq == 1
