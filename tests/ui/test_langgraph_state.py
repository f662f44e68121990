"""A LangGraph checkpoint's state as the viewer builds it from rows already read
(``views.checkpoint_state``), without a database: which channels are state, where
each value comes from, and what is shown when a value cannot or may not be decoded."""

from __future__ import annotations

import os
import pickle
from datetime import UTC, datetime
from pathlib import Path

import ormsgpack

from agentledger.langgraph_records import CheckpointRow, ValueRow
from agentledger.ui.views import checkpoint_state


def checkpoint(versions: dict[str, str], inline: dict[str, object] | None = None) -> CheckpointRow:
    serialized = ormsgpack.packb({"v": 4, "channel_values": inline or {}})
    return CheckpointRow(
        checkpoint_ns="",
        checkpoint_id="c-1",
        parent_checkpoint_id=None,
        metadata={"source": "loop", "step": 1},
        type="msgpack",
        size=len(serialized),
        created_at=datetime(2026, 11, 28, tzinfo=UTC),
        channel_versions=versions,
        checkpoint=serialized,
    )


def value(channel: str, version: str, type: str, data: bytes | None) -> ValueRow:
    return ValueRow("", channel, version, type, len(data or b""), data)


def test_state_takes_inline_values_and_values_at_the_versions_named() -> None:
    row = checkpoint({"order": "2", "items": "3"}, inline={"order": "1042"})
    values = {("", "items", "3"): value("items", "3", "msgpack", ormsgpack.packb(["a", "b"]))}
    assert checkpoint_state(row, values) == [
        {"channel": "items", "decoded": True, "value": ["a", "b"], "type": "msgpack", "size": 5},
        {"channel": "order", "decoded": True, "value": "1042"},
    ]


def test_langgraphs_own_channels_are_not_state() -> None:
    row = checkpoint({"__start__": "1", "branch:to:pay": "2", "__pregel_tasks": "3"})
    assert checkpoint_state(row, {}) == []


def test_a_channel_without_a_value_is_left_out() -> None:
    row = checkpoint({"decision": "1"})
    assert (
        checkpoint_state(row, {("", "decision", "1"): value("decision", "1", "empty", None)}) == []
    )


def test_a_value_that_was_not_read_says_so() -> None:
    (shown,) = checkpoint_state(checkpoint({"order": "1"}), {})
    assert (shown["channel"], shown["decoded"], shown["type"]) == ("order", False, None)


def test_a_pickled_value_is_shown_as_type_and_size_even_when_its_bytes_are_at_hand(
    tmp_path: Path,
) -> None:
    touched = tmp_path / "pwned"

    class Payload:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (os.system, (f"touch {touched}",))

    data = pickle.dumps(Payload())
    (shown,) = checkpoint_state(
        checkpoint({"order": "1"}), {("", "order", "1"): value("order", "1", "pickle", data)}
    )
    assert (shown["decoded"], shown["value"], shown["type"]) == (False, None, "pickle")
    assert shown["size"] == len(data) and not touched.exists()
