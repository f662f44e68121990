"""Revision 0005 (LangGraph's checkpoints newest first with their namespace): the
index replaced without touching a row, and put back on downgrade."""

from __future__ import annotations

from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_config
from sqlalchemy import create_engine, inspect
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger import Ledger, migrations
from agentledger.integrations.langgraph import LedgerSaver

from ._support import drift

CHECKPOINTS = "agentledger_langgraph_checkpoints"
NEWEST = "ix_agentledger_langgraph_checkpoints_newest"
BY_SESSION = "ix_agentledger_langgraph_checkpoints_by_session"


def _indexes(url: URL) -> dict[str, list[str]]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        found = inspect(engine).get_indexes(CHECKPOINTS)
        return {str(index["name"]): list(index["column_names"]) for index in found}
    finally:
        engine.dispose()


def _checkpoint_ids(url: URL) -> list[str]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            rows = connection.exec_driver_sql(
                f"SELECT checkpoint_id FROM {CHECKPOINTS} ORDER BY checkpoint_id DESC"
            )
            return [str(row[0]) for row in rows]
    finally:
        engine.dispose()


def _at_0004_with_a_thread(url: URL) -> list[str]:
    """A database at 0004 holding a thread of three checkpoints (put at head, since a
    ledger runs on a database at head only, then downgraded): their ids."""
    migrations.upgrade(url)
    with Ledger(url) as ledger:
        saver = LedgerSaver(ledger)
        config = generate_config("t")
        for step in range(3):
            checkpoint = generate_checkpoint(
                channel_values={"v": step}, channel_versions={"v": step + 1}
            )
            config = saver.put(config, checkpoint, {"step": step}, {"v": step + 1})
    migrations.downgrade(url, "agentledger_0004")
    return _checkpoint_ids(url)


def test_upgrading_a_0004_database_replaces_the_index_and_keeps_every_checkpoint(
    scratch_url: URL,
) -> None:
    before = _at_0004_with_a_thread(scratch_url)

    migrations.upgrade(scratch_url)

    indexes = _indexes(scratch_url)
    assert indexes[NEWEST] == ["session_id", "checkpoint_id", "checkpoint_ns"]
    assert BY_SESSION not in indexes
    assert drift(scratch_url) == []
    with Ledger(scratch_url) as ledger:
        listed = LedgerSaver(ledger).list(generate_config("t"))
        assert [found.config["configurable"]["checkpoint_id"] for found in listed] == before


def test_downgrading_to_0004_puts_the_old_index_back_and_keeps_every_checkpoint(
    scratch_url: URL,
) -> None:
    before = _at_0004_with_a_thread(scratch_url)

    indexes = _indexes(scratch_url)
    assert indexes[BY_SESSION] == ["session_id", "checkpoint_id"]
    assert NEWEST not in indexes
    assert len(before) == 3
    migrations.upgrade(scratch_url)
    assert _checkpoint_ids(scratch_url) == before
