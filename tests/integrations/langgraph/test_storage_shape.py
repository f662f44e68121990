"""How a checkpoint is laid out: small primitive channel values inside the serialized
checkpoint (no value row of their own), what the row's columns hold not repeated in
it, large values compressed, and threads stored in the earlier layout read back
unchanged."""

from __future__ import annotations

import inspect
import os
from types import SimpleNamespace
from typing import Any, cast

from langgraph.checkpoint.conformance.test_utils import generate_config
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from sqlalchemy import Connection, Table, func, select

from agentledger.models import AgentLangGraphBlob, AgentLangGraphCheckpoint, AgentLangGraphWrite
from agentledger.models.langgraph import MAX_TYPE_LENGTH
from agentledger.repositories.langgraph import (
    COMPRESS_FROM,
)

from ...contract._sql import on_engine
from .conftest import Saved

BLOBS = cast(Table, AgentLangGraphBlob.__table__)
CHECKPOINTS = cast(Table, AgentLangGraphCheckpoint.__table__)
WRITES = cast(Table, AgentLangGraphWrite.__table__)
LONG = "a long prompt that is worth a row of its own. " * 10


def _checkpoint(saved: Saved, step: int, versions: dict[str, Any]) -> tuple[Any, Any]:
    saver = saved.saver
    new = {"step": saver.get_next_version(versions.get("step"), None)}
    if "prompt" not in versions:
        new["prompt"] = saver.get_next_version(None, None)
    versions.update(new)
    checkpoint = {
        "v": 4,
        "id": f"1ef4f797-8335-6428-8001-{step:012d}",
        "ts": "2026-12-01T00:00:00+00:00",
        "channel_values": {"step": step, "label": "short", "prompt": LONG, "none": None},
        "channel_versions": dict(versions),
        "versions_seen": {},
        "updated_channels": sorted(new),
    }
    return checkpoint, new


def _repository(saved: Saved) -> Any:
    """The repository under the saver, sync or async as the saver is."""
    return saved.ledger.langgraph()


async def _done(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def _stored(saved: Saved, query: Any) -> Any:
    def read(connection: Connection) -> Any:
        return connection.execute(query).all()

    return await on_engine(SimpleNamespace(ledger=saved.ledger), read)  # type: ignore[arg-type]


async def test_small_primitive_values_stay_inside_the_checkpoint(saved: Saved) -> None:
    versions: dict[str, Any] = {}
    config = generate_config("shape")
    for step in range(3):
        checkpoint, new = _checkpoint(saved, step, versions)
        config = await saved.saver.aput(config, checkpoint, {"step": step}, new)
    rows = await _stored(saved, select(BLOBS.c.channel, func.count()).group_by(BLOBS.c.channel))
    assert dict(rows) == {"prompt": 1}  # the step changed three times: no value row
    found = await saved.saver.aget_tuple(generate_config("shape"))
    assert found is not None
    assert found.checkpoint["channel_values"] == {
        "step": 2,
        "label": "short",
        "prompt": LONG,
        "none": None,
    }
    assert found.checkpoint["channel_versions"] == versions
    assert found.checkpoint["id"] == checkpoint["id"]


async def test_the_row_s_id_and_text_versions_are_not_repeated_in_the_serialized_checkpoint(
    saved: Saved,
) -> None:
    checkpoint, new = _checkpoint(saved, 0, {})
    await saved.saver.aput(generate_config("lean"), checkpoint, {"step": 0}, new)
    ((kind, stored),) = await _stored(saved, select(CHECKPOINTS.c.type, CHECKPOINTS.c.checkpoint))
    inside = JsonPlusSerializer().loads_typed((kind, bytes(stored)))
    assert "id" not in inside and "channel_versions" not in inside
    assert inside["channel_values"] == {"step": 0, "label": "short", "none": None}


async def test_int_versions_are_kept_inside_so_they_read_back_as_ints(saved: Saved) -> None:
    checkpoint, _ = _checkpoint(saved, 0, {})
    checkpoint["channel_versions"] = {"step": 1, "prompt": 1}
    config = generate_config("ints")
    await saved.saver.aput(config, checkpoint, {}, {"step": 1, "prompt": 1})
    found = await saved.saver.aget_tuple(generate_config("ints"))
    assert found is not None and found.checkpoint["channel_versions"] == {"step": 1, "prompt": 1}


async def test_a_checkpoint_stored_in_the_earlier_layout_reads_back_unchanged(
    saved: Saved,
) -> None:
    # Before: every value in a row of its own, the id and versions inside the checkpoint.
    serde = JsonPlusSerializer()
    checkpoint, new = _checkpoint(saved, 4, {})
    values = checkpoint["channel_values"]
    rest = {key: value for key, value in checkpoint.items() if key != "channel_values"}
    stored = _repository(saved).put(
        "earlier",
        "",
        checkpoint["id"],
        parent_checkpoint_id=None,
        checkpoint=serde.dumps_typed(rest),
        channel_versions=checkpoint["channel_versions"],
        metadata={"step": 4},
        blobs=[
            (channel, version, serde.dumps_typed(values[channel]))
            for channel, version in new.items()
        ],
    )
    await _done(stored)
    found = await saved.saver.aget_tuple(generate_config("earlier"))
    assert found is not None
    assert found.checkpoint["channel_values"] == {"step": 4, "prompt": LONG}
    assert found.checkpoint["channel_versions"] == checkpoint["channel_versions"]
    assert found.checkpoint["id"] == checkpoint["id"]


def _messages(count: int) -> list[str]:
    return [
        f"user: please look up the opening hours of the museum, thanks {n:05d}"
        for n in range(count)
    ]


async def _put_values(saved: Saved, thread: str, values: dict[str, Any]) -> Any:
    versions = dict.fromkeys(values, saved.saver.get_next_version(None, None))
    checkpoint = {
        "v": 4,
        "id": "1ef4f797-8335-6428-8001-000000000001",
        "ts": "2026-12-01T00:00:00+00:00",
        "channel_values": values,
        "channel_versions": versions,
        "versions_seen": {},
        "updated_channels": sorted(values),
    }
    return await saved.saver.aput(generate_config(thread), checkpoint, {}, versions)


async def test_a_large_value_is_stored_compressed_and_reads_back_as_it_was(saved: Saved) -> None:
    messages = _messages(1000)
    config = await _put_values(saved, "long", {"messages": messages})
    await saved.saver.aput_writes(config, [("messages", _messages(40))], "task-1")
    serialized = JsonPlusSerializer().dumps_typed(messages)
    ((kind, blob),) = await _stored(saved, select(BLOBS.c.type, BLOBS.c.blob))
    assert kind == f"{serialized[0]}+zlib"
    assert len(blob) * 10 < len(serialized[1])  # 68 KB of msgpack: under 7 KB stored
    ((write_kind,),) = await _stored(saved, select(WRITES.c.type))
    assert write_kind == f"{serialized[0]}+zlib"
    found = await saved.saver.aget_tuple(generate_config("long"))
    assert found is not None
    assert found.checkpoint["channel_values"] == {"messages": messages}
    assert found.pending_writes == [("task-1", "messages", _messages(40))]
    (listed,) = [item async for item in saved.saver.alist(generate_config("long"))]
    assert listed.checkpoint["channel_values"] == {"messages": messages}


async def test_small_and_incompressible_values_are_stored_as_the_serializer_gave_them(
    saved: Saved,
) -> None:
    noise = os.urandom(COMPRESS_FROM * 4)
    await _put_values(saved, "plain", {"small": LONG, "noise": noise})
    serde = JsonPlusSerializer()
    rows = dict(await _stored(saved, select(BLOBS.c.channel, BLOBS.c.type)))
    assert rows == {"small": serde.dumps_typed(LONG)[0], "noise": serde.dumps_typed(noise)[0]}
    found = await saved.saver.aget_tuple(generate_config("plain"))
    assert found is not None
    assert found.checkpoint["channel_values"] == {"small": LONG, "noise": noise}


async def test_a_large_checkpoint_is_stored_compressed_and_a_long_type_tag_is_not(
    saved: Saved,
) -> None:
    # A tag too long to take the +zlib mark keeps its value as given.
    data = b"the same bytes again " * 200
    long_tag = "t" * (MAX_TYPE_LENGTH - 2)
    repository = _repository(saved)
    await _done(
        repository.put(
            "typed",
            "",
            "1ef4f797-8335-6428-8001-000000000001",
            parent_checkpoint_id=None,
            checkpoint=("msgpack", data),
            channel_versions={"long": "1"},
            metadata={},
            blobs=[("long", "1", (long_tag, data))],
        )
    )
    ((checkpoint_type, checkpoint_size),) = await _stored(
        saved, select(CHECKPOINTS.c.type, func.length(CHECKPOINTS.c.checkpoint))
    )
    assert checkpoint_type == "msgpack+zlib" and checkpoint_size < len(data) // 10
    ((blob_type, blob_size),) = await _stored(
        saved, select(BLOBS.c.type, func.length(BLOBS.c.blob))
    )
    assert (blob_type, blob_size) == (long_tag, len(data))
    found = await _done(repository.get("typed", ""))
    assert found.checkpoint == ("msgpack", data)
    assert found.channel_values == {"long": (long_tag, data)}
