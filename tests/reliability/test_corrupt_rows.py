"""A stored value that is not JSON raises a typed error naming the row; never skipped."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.conformance.test_utils import (
    generate_checkpoint,
    generate_config,
    generate_metadata,
)
from sqlalchemy import text

from agentledger import AsyncLedger, Ledger, migrations
from agentledger.errors import CorruptRecordError, DatabaseError
from agentledger.integrations.langgraph import LedgerSaver

pytestmark = pytest.mark.sqlite


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/corrupt.db"
    migrations.upgrade(url)
    with Ledger(url) as ledger:
        record = ledger.sessions.create("hurt", state={"ok": True})
        ledger.messages.append(
            record,
            [{"role": "user", "content": "fine"}, {"role": "user", "content": "to be broken"}],
        )
        with ledger.engine.begin() as connection:  # an out-of-band writer, not agentledger
            connection.execute(
                text("UPDATE agentledger_messages SET content = '{not json' WHERE seq = 2")
            )
            connection.execute(
                text("UPDATE agentledger_sessions SET state = 'nope' WHERE id = 'hurt'")
            )
    return url


def test_a_corrupt_message_names_its_row_and_column(url: str) -> None:
    with Ledger(url) as ledger, pytest.raises(CorruptRecordError) as raised:
        ledger.messages.all("hurt")
    error = raised.value
    assert (error.table, error.key, error.column) == (
        "agentledger_messages",
        ("hurt", 2),
        "content",
    )
    assert isinstance(error, DatabaseError)


async def test_a_corrupt_session_state_names_its_row_on_the_async_api(url: str) -> None:
    async with AsyncLedger(url) as ledger:
        with pytest.raises(CorruptRecordError) as raised:
            await ledger.sessions.get("hurt")
    assert (raised.value.key, raised.value.column) == ("hurt", "state")


@pytest.fixture
def memory_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/memories.db"
    migrations.upgrade(url)
    with Ledger(url) as ledger:
        for namespace, key in [("u", "whole"), ("u", "cut"), ("g", "whole"), ("g", "garbled")]:
            ledger.memory.put((namespace,), key, {"k": key}, embeddings=[("k", [1.0, 0.0])])
        with ledger.engine.begin() as connection:  # an out-of-band writer, not agentledger
            connection.execute(
                text(
                    "UPDATE agentledger_memory_items SET embeddings = substr(embeddings, 1, 6)"
                    " WHERE key = 'cut'"
                )
            )
            connection.execute(
                text("UPDATE agentledger_memory_items SET value = '[1]' WHERE key = 'garbled'")
            )
    return url


def test_a_memory_vector_cut_short_names_its_row_when_searched_by_meaning(
    memory_url: str,
) -> None:
    with Ledger(memory_url) as ledger, pytest.raises(CorruptRecordError) as raised:
        ledger.memory.search(("u",), query_vector=[1.0, 0.0])
    error = raised.value
    assert (error.table, error.key, error.column) == (
        "agentledger_memory_items",
        ("u", "cut"),
        "embeddings",
    )


def test_a_memory_value_not_an_object_names_its_row_when_read(memory_url: str) -> None:
    with Ledger(memory_url) as ledger:
        with pytest.raises(CorruptRecordError) as raised:
            ledger.memory.get(("g",), "garbled")
        assert (raised.value.key, raised.value.column) == (("g", "garbled"), "value")
        with pytest.raises(CorruptRecordError):
            ledger.memory.search(("g",), query_vector=[1.0, 0.0])


@contextmanager
def _langgraph_thread(tmp_path: Path, values: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    """A saver on a fresh SQLite file holding thread ``t``'s one checkpoint of
    ``values``, and that checkpoint's config."""
    url = f"sqlite:///{tmp_path}/corrupt_langgraph.db"
    migrations.upgrade(url)
    with Ledger(url) as ledger:
        saver = LedgerSaver(ledger)
        versions = dict.fromkeys(values, 1)
        checkpoint = generate_checkpoint(channel_values=values, channel_versions=versions)
        yield saver, saver.put(generate_config("t"), checkpoint, generate_metadata(), versions)


@pytest.mark.parametrize("column", ["channel_versions", "metadata"])
def test_a_corrupt_langgraph_checkpoint_names_its_row_and_column(
    tmp_path: Path, column: str
) -> None:
    with _langgraph_thread(tmp_path, {"a": 1}) as (saver, stored):
        with saver.ledger.engine.begin() as connection:  # an out-of-band writer
            connection.execute(
                text(f"UPDATE agentledger_langgraph_checkpoints SET {column} = '{{not json'")
            )
        for read in (
            lambda: saver.get_tuple({"configurable": {"thread_id": "t"}}),
            lambda: saver.get_tuple(stored),
            lambda: list(saver.list({"configurable": {"thread_id": "t"}}, limit=10)),
        ):
            with pytest.raises(CorruptRecordError) as raised:
                read()
            assert raised.value.table == "agentledger_langgraph_checkpoints"


def test_a_compressed_langgraph_value_that_does_not_decompress_names_its_row(
    tmp_path: Path,
) -> None:
    values = {"long": ["a message that repeats"] * 200}
    with _langgraph_thread(tmp_path, values) as (saver, _):
        with saver.ledger.engine.begin() as connection:  # an out-of-band writer
            (kind,) = connection.execute(text("SELECT type FROM agentledger_langgraph_blobs")).one()
            assert kind.endswith("+zlib")
            connection.execute(text("UPDATE agentledger_langgraph_blobs SET blob = x'00ff'"))
        with pytest.raises(CorruptRecordError) as raised:
            saver.get_tuple({"configurable": {"thread_id": "t"}})
    error = raised.value
    assert (error.table, error.column) == ("agentledger_langgraph_blobs", "blob")
    assert error.key[2:] == ("long", "1")
