"""Revision 0006 (long-term memory): a table added beside populated ones, which keep
every row; downgrade drops it and its memories only."""

from __future__ import annotations

from sqlalchemy.engine import URL

from agentledger import Ledger, migrations

from ._support import drift, our_table_names

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
