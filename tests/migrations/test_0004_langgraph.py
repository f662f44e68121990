"""Revision 0004 (LangGraph's checkpointer tables): added without touching a row of the
tables before it, and dropped again on downgrade."""

from __future__ import annotations

from langgraph.checkpoint.conformance.test_utils import (
    generate_checkpoint,
    generate_config,
    generate_metadata,
)
from sqlalchemy.engine import URL

from agentledger import Ledger, migrations
from agentledger.integrations.langgraph import LedgerSaver

from ._support import drift, insert_legacy_rows, legacy_rows, table_names

NEW_TABLES = {
    "agentledger_langgraph_checkpoints",
    "agentledger_langgraph_blobs",
    "agentledger_langgraph_writes",
}


def test_upgrading_a_populated_0003_database_adds_the_tables_and_keeps_every_row(
    scratch_url: URL,
) -> None:
    migrations.upgrade(scratch_url, "agentledger_0003")
    insert_legacy_rows(scratch_url)
    before = legacy_rows(scratch_url)

    migrations.upgrade(scratch_url)

    assert migrations.current(scratch_url) == migrations.head()
    assert legacy_rows(scratch_url) == before
    assert table_names(scratch_url) >= NEW_TABLES
    assert drift(scratch_url) == []
    with Ledger(scratch_url) as ledger:
        saver = LedgerSaver(ledger)
        stored = saver.put(
            generate_config("t"),
            generate_checkpoint(channel_values={"a": 1}, channel_versions={"a": 1}),
            generate_metadata(),
            {"a": 1},
        )
        found = saver.get_tuple(stored)
        assert found is not None and found.checkpoint["channel_values"] == {"a": 1}


def test_downgrading_to_0003_drops_the_tables_and_upgrading_again_round_trips(
    scratch_url: URL,
) -> None:
    migrations.upgrade(scratch_url, "agentledger_0003")
    insert_legacy_rows(scratch_url)
    before = legacy_rows(scratch_url)
    migrations.upgrade(scratch_url)

    migrations.downgrade(scratch_url, "agentledger_0003")

    assert not NEW_TABLES & table_names(scratch_url)
    assert legacy_rows(scratch_url) == before
    migrations.upgrade(scratch_url)
    assert drift(scratch_url) == []
