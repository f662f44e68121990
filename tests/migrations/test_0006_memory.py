"""Revision 0006 (long-term memory): a table added beside populated ones, which keep
every row, with each database's own text index over its words; downgrade drops them
and the memories only."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger import Ledger, migrations
from agentledger.models import WORDS_TABLE

from ._support import drift, our_table_names, table_names

ITEMS = "agentledger_memory_items"


def _populated_at_0005(url: URL) -> None:
    """A database at 0005 holding a session with a message and app state."""
    migrations.upgrade(url, "agentledger_0005")
    # A ledger runs only on a database at head: write at head, then come back down.
    migrations.upgrade(url)
    with Ledger(url) as ledger:
        ledger.sessions.create("kept", app_name="app", user_id="ada")
        ledger.messages.append("kept", {"role": "user", "content": "hello"})
        ledger.app_state.merge("app", {"set": {"k": 1}})
    migrations.downgrade(url, "agentledger_0005")


def test_upgrading_a_populated_0005_database_adds_the_table_and_keeps_every_row(
    scratch_url: URL,
) -> None:
    _populated_at_0005(scratch_url)
    assert ITEMS not in our_table_names(scratch_url)

    migrations.upgrade(scratch_url)

    assert ITEMS in our_table_names(scratch_url)
    assert drift(scratch_url) == []
    with Ledger(scratch_url) as ledger:
        assert [m.content for m in ledger.messages.all("kept")] == ["hello"]
        assert ledger.app_state.get("app").state == {"k": 1}
        ledger.memory.put(("memories", "ada"), "k", {"v": 1})
        assert ledger.memory.get(("memories", "ada"), "k").value == {"v": 1}


def test_downgrading_to_0005_drops_the_memories_and_keeps_the_sessions(
    scratch_url: URL,
) -> None:
    _populated_at_0005(scratch_url)
    migrations.upgrade(scratch_url)
    with Ledger(scratch_url) as ledger:
        ledger.memory.put(("memories", "ada"), "k", {"v": 1})

    migrations.downgrade(scratch_url, "agentledger_0005")

    assert ITEMS not in our_table_names(scratch_url)
    migrations.upgrade(scratch_url)
    with Ledger(scratch_url) as ledger:
        assert [m.content for m in ledger.messages.all("kept")] == ["hello"]
        assert ledger.memory.get(("memories", "ada"), "k") is None


TEXT_INDEX_OF = {
    "postgresql": "ix_agentledger_memory_items_words_tsvector",
    "mysql": "ix_agentledger_memory_items_words",
}
"""The text index over memory items' words each server family gets (SQLite: FTS5)."""


def _text_index_names(url: URL) -> set[str]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            if connection.dialect.name == "sqlite":
                rows = connection.execute(
                    text(
                        "SELECT name FROM sqlite_master WHERE name LIKE 'agentledger_memory_words%'"
                    )
                )
                return {row[0] for row in rows}
            inspector = inspect(connection)
            if not inspector.has_table(ITEMS):
                return set()
            indexes = inspector.get_indexes(ITEMS)
            return {index["name"] for index in indexes if "words" in str(index["name"])}
    finally:
        engine.dispose()


def test_the_upgrade_makes_the_databases_own_text_index_and_the_downgrade_drops_it(
    scratch_url: URL,
) -> None:
    migrations.upgrade(scratch_url)
    dialect = scratch_url.get_backend_name()
    made = _text_index_names(scratch_url)
    if dialect == "sqlite":
        table_and_triggers = {
            WORDS_TABLE,
            *(f"{WORDS_TABLE}_{e}" for e in ("insert", "delete", "update")),
        }
        assert table_and_triggers <= made
    else:
        assert made == {TEXT_INDEX_OF[dialect]}

    migrations.downgrade(scratch_url, "agentledger_0005")

    assert _text_index_names(scratch_url) == set()
    assert not {name for name in table_names(scratch_url) if name.startswith(WORDS_TABLE)}


@pytest.mark.sqlite
def test_keyword_search_answers_on_a_sqlite_database_without_fts5s_table(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'no-fts.db'}"
    migrations.upgrade(url)
    engine = create_engine(url, poolclass=NullPool)
    with engine.begin() as connection:  # as on a SQLite built without FTS5
        for event in ("insert", "delete", "update"):
            connection.execute(text(f"DROP TRIGGER {WORDS_TABLE}_{event}"))
        connection.execute(text(f"DROP TABLE {WORDS_TABLE}"))
    engine.dispose()

    with Ledger(url) as ledger:
        ledger.memory.put(("memories", "ada"), "a", {}, text="pasta tonight")
        ledger.memory.put(("memories", "ada"), "b", {}, text="soup")
        found = ledger.memory.search(("memories",), words="pasta")
    assert [item.key for item in found] == ["a"]
