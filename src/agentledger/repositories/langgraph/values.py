"""LangGraph's stored shapes, I/O-free: the checks of ids, namespaces and values, the
codec of a stored value (its type tag and bytes, zlib-compressed when that pays), the
order LangGraph reads writes in, and the checkpoints assembled from rows already read
(their JSON columns decoded where a read gave them as text)."""

from __future__ import annotations

import builtins
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, cast

from sqlalchemy import (
    Table,
)

from ..._checks import checked_text
from ..._json import decode_json
from ..._limits import (
    MAX_CHECKPOINT_ID_LENGTH,
    MAX_NAMESPACE_LENGTH,
    MAX_TYPE_LENGTH,
)
from ...errors import CorruptRecordError, ValidationError
from ...langgraph_records import (
    SHOWN_TYPES,
    SHOWN_VALUE_BYTES,
    StoredCheckpoint,
    StoredWrite,
    Typed,
)
from ...models import AgentLangGraphBlob, AgentLangGraphCheckpoint, AgentLangGraphWrite

CHECKPOINTS = cast(Table, AgentLangGraphCheckpoint.__table__)
BLOBS = cast(Table, AgentLangGraphBlob.__table__)
WRITES = cast(Table, AgentLangGraphWrite.__table__)
"""LangGraph's three tables (their models: ``models/langgraph.py``)."""


COMPRESSED = "+zlib"
"""Ends the stored type tag of a value stored zlib-compressed (its type tag is the rest),
as LangGraph's own serializer wrappers mark theirs (``EncryptedSerializer``:
``msgpack+aes``). Reserved: a serializer's own tag may not end so."""


COMPRESS_FROM = 1024
"""Values of at least this many bytes are stored compressed when that saves a tenth or
more. A long thread's growing channel is stored at every step it changes (a list of
1,000 messages: 68 KB of msgpack, each version apart): compressed, 2.8 KB. PostgreSQL
compresses values over 2 KB itself, 4.4 KB for that one; SQLite stores every byte.
Smaller values gain less than the call costs."""


_Values = dict[tuple[str, str, str, str], Typed]


_Writes = dict[tuple[str, str, str], list[StoredWrite]]


@dataclass(frozen=True)
class _Position:
    checkpoint_id: str
    checkpoint_ns: str
    session_id: str


def _namespace(value: object) -> str:
    return checked_text(value, "checkpoint_ns", max_length=MAX_NAMESPACE_LENGTH, min_length=0)


def _checkpoint_id(value: object, name: str = "checkpoint_id") -> str:
    return checked_text(value, name, max_length=MAX_CHECKPOINT_ID_LENGTH)


def _typed(value: object, name: str) -> Typed:
    if (
        not isinstance(value, tuple)
        or len(value) != 2
        or not isinstance(value[0], str)
        or not isinstance(value[1], bytes | bytearray | memoryview)
    ):
        raise ValidationError(f"{name} must be a (type, bytes) pair", path=name)
    checked_text(value[0], f"{name} type", max_length=MAX_TYPE_LENGTH)
    if value[0].endswith(COMPRESSED):
        raise ValidationError(
            f"{name} type {value[0]!r} ends in {COMPRESSED!r}, which agentledger's stored "
            "types keep for the values it compressed",
            path=name,
        )
    return value[0], bytes(value[1])


def _packed(typed: Typed) -> Typed:
    """``typed`` as stored: compressed when large enough to gain (``COMPRESS_FROM``)."""
    kind, data = typed
    if len(data) >= COMPRESS_FROM and len(kind) + len(COMPRESSED) <= MAX_TYPE_LENGTH:
        packed = zlib.compress(data, 1)
        if len(packed) * 10 <= len(data) * 9:
            return kind + COMPRESSED, packed
    return typed


def _unpacked(kind: str, data: Any, table: Table, key: object, column: str = "blob") -> Typed:
    """A stored value as its serializer gave it (decompressed if ``_packed`` did).

    Raises:
        CorruptRecordError: a value typed compressed that does not decompress.
    """
    if not kind.endswith(COMPRESSED):
        return kind, bytes(data)
    try:
        return kind[: -len(COMPRESSED)], zlib.decompress(data)
    except zlib.error as error:
        raise CorruptRecordError(
            f"{table.name} row {key!r}: column {column} is not the zlib data its type "
            f"{kind!r} says ({error}); it was written by something other than agentledger",
            table=table.name,
            key=key,
            column=column,
        ) from None


def _size_check(total: int, limit: int, what: str) -> None:
    if total > limit:
        raise ValidationError(
            f"{what} is {total:,} bytes serialized, over the limit of {limit:,} "
            "(Limits.max_checkpoint_bytes)",
            path=what,
        )


def shown_types() -> tuple[str, ...]:
    """The stored type tags whose bytes ``session_rows`` reads: ``SHOWN_TYPES``, plain
    or compressed."""
    return (*SHOWN_TYPES, *(kind + COMPRESSED for kind in SHOWN_TYPES))


def _shown(kind: str, data: bytes | None, table: Table, key: object) -> bytes | None:
    """A small value's bytes as ``session_rows`` returns them (decompressed), None when
    not read or larger than ``SHOWN_VALUE_BYTES`` once decompressed."""
    if data is None:
        return None
    _, value = _unpacked(kind, data, table, key)
    return value if len(value) <= SHOWN_VALUE_BYTES else None


def _stored_write(
    checkpoint: tuple[str, str, str],
    task_id: str,
    channel: str,
    kind: str,
    blob: bytes,
    task_path: str,
    idx: int,
) -> StoredWrite:
    """A pending write on ``checkpoint`` (session, namespace, id) from its stored
    columns, its value decompressed if stored so."""
    value = _unpacked(kind, blob, WRITES, (*checkpoint, task_id, idx))
    return StoredWrite(task_id, channel, value, task_path, idx)


_LANGGRAPH_ORDER = itemgetter(
    *(StoredWrite._fields.index(name) for name in ("task_path", "task_id", "idx"))
)
"""The order of one checkpoint's pending writes in LangGraph's own savers: a
``StoredWrite``'s task path, task id and index (by position: faster than by name)."""


def _in_langgraph_order(writes: builtins.list[StoredWrite]) -> None:
    """Sort one checkpoint's pending writes as LangGraph's own savers return them."""
    writes.sort(key=_LANGGRAPH_ORDER)


def _matches(metadata: dict[str, Any], filter: dict[str, Any]) -> bool:
    return all(key in metadata and metadata[key] == value for key, value in filter.items())


def once_per_index(
    rows: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A batch of pending-write rows as if written one by one: (regular, special). A
    batch may carry one index twice (a node that interrupts twice writes
    ``__resume__`` twice, at its special index); of a regular index (>= 0) the first
    write is kept, of a special one the last replaces. One upsert cannot touch a row
    twice (PostgreSQL's CardinalityViolation), so each index goes once."""
    regular: dict[int, dict[str, Any]] = {}
    special: dict[int, dict[str, Any]] = {}
    for row in rows:
        if row["idx"] >= 0:
            regular.setdefault(row["idx"], row)
        else:
            special[row["idx"]] = row
    return list(regular.values()), list(special.values())


def versions_of(row: Any) -> dict[str, str]:
    """A checkpoint row's channel versions, decoded when the read gave them as text (the
    one-statement reads send them so: ``statements._checkpoint_with_parts``).

    Raises:
        CorruptRecordError: text that is not JSON.
    """
    versions = row.channel_versions
    if isinstance(versions, str):
        versions = decode_json(
            versions, table=CHECKPOINTS.name, key=row.checkpoint_id, column="versions"
        )
    return cast(dict[str, str], versions)


def metadata_of(row: Any) -> dict[str, Any]:
    """A checkpoint row's metadata, decoded when the read gave it as text.

    Raises:
        CorruptRecordError: text that is not JSON.
    """
    value = row.metadata
    if isinstance(value, str):
        value = decode_json(
            value,
            table=CHECKPOINTS.name,
            key=(row.session_id, row.checkpoint_ns, row.checkpoint_id),
            column="metadata",
        )
    return cast(dict[str, Any], value)


def assembled(rows: Sequence[Any], values: _Values, writes: _Writes) -> list[StoredCheckpoint]:
    """The checkpoints of ``rows`` (checkpoint rows, with their thread id), each with the
    channel values of its versions found in ``values`` and its pending writes in
    ``writes``, as read already.

    Raises:
        CorruptRecordError: a row whose checkpoint, versions or metadata do not decode.
    """
    result = []
    for row in rows:
        versions = versions_of(row)
        place = (row.session_id, row.checkpoint_ns)
        channel_values = {}
        for channel, version in versions.items():
            found = values.get((*place, channel, version))
            if found is not None:
                channel_values[channel] = found
        result.append(
            StoredCheckpoint(
                thread_id=row.thread_id,
                checkpoint_ns=row.checkpoint_ns,
                checkpoint_id=row.checkpoint_id,
                parent_checkpoint_id=row.parent_checkpoint_id,
                checkpoint=_unpacked(
                    row.type,
                    row.checkpoint,
                    CHECKPOINTS,
                    (*place, row.checkpoint_id),
                    "checkpoint",
                ),
                metadata=metadata_of(row),
                channel_values=channel_values,
                pending_writes=writes.get((*place, row.checkpoint_id), []),
                channel_versions=versions,
            )
        )
    return result
