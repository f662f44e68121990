"""The LangGraph store's records: what ``ledger.langgraph()`` takes and gives, and so
what ``agentledger.integrations.langgraph``'s savers and the viewer read and write.

Pure shapes, no I/O: values travel serialized, as ``(type tag, bytes)`` pairs, and the
adapter owns the serializer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, NamedTuple

LANGGRAPH_APP_NAME = "langgraph"
"""The app_name of the threads' sessions unless another is given."""
Typed = tuple[str, bytes]
"""A value as LangGraph's serializer gives it: ``(type tag, bytes)``."""
PruneStrategy = Literal["keep_latest", "delete"]
"""``keep_latest``: the newest checkpoint of each namespace stays; ``delete``: none."""


class StoredWrite(NamedTuple):
    """A pending write as stored (a named tuple: a read makes one per pending write,
    and a frozen dataclass took about twice as long to make)."""

    task_id: str
    """The task that wrote it."""
    channel: str
    """The channel written."""
    value: Typed
    """The serialized value."""
    task_path: str
    """The task's path."""
    idx: int
    """Its index among the task's writes (negative for special channels)."""


class StoredCheckpoint(NamedTuple):
    """A checkpoint as stored, with its channel values and its pending writes (a named
    tuple, as ``StoredWrite``: a page of ``list`` makes one per checkpoint, and a frozen
    dataclass of these nine fields took 1.9 us to make against 0.75)."""

    thread_id: str
    """The LangGraph thread (the session's external key)."""
    checkpoint_ns: str
    """The namespace."""
    checkpoint_id: str
    """The checkpoint id."""
    parent_checkpoint_id: str | None
    """The checkpoint it was written from."""
    checkpoint: Typed
    """The serialized checkpoint, without its channel values."""
    metadata: dict[str, Any]
    """Its metadata."""
    channel_values: dict[str, Typed]
    """Channel -> serialized value, for the channels that have one."""
    pending_writes: list[StoredWrite]
    """The writes pending on it, in LangGraph's order (task path, task id, index)."""
    channel_versions: dict[str, str]
    """Channel -> the version the checkpoint has (as stored: text)."""


SHOWN_VALUE_BYTES = 16384
"""The largest value (decompressed) ``session_rows`` returns the bytes of, when its type
is one of ``SHOWN_TYPES`` (others: type and size only)."""
SHOWN_TYPES = ("json", "msgpack")
"""The type tags whose bytes ``session_rows`` returns: LangGraph's serializer writes
these without pickle, so a viewer can decode them without running stored code. A
``pickle`` value (or any other tag) is only ever described by its type and size."""


@dataclass(frozen=True)
class CheckpointRow:
    """A checkpoint row as a viewer lists it: its place in the tree and its metadata,
    the serialized checkpoint only as its type tag and size."""

    checkpoint_ns: str
    """The namespace (empty for the root graph)."""
    checkpoint_id: str
    """The checkpoint id (time-ordered)."""
    parent_checkpoint_id: str | None
    """The checkpoint it was written from."""
    metadata: dict[str, Any]
    """Its metadata (source, step, run id...)."""
    type: str
    """The serializer's type tag of the checkpoint, as stored (``+zlib`` at its end
    when stored compressed)."""
    size: int
    """The serialized checkpoint's size in bytes, as stored."""
    created_at: datetime
    """When it was stored."""
    channel_versions: dict[str, str] = field(default_factory=dict)
    """Channel -> the version it has at this checkpoint (its value: the ``ValueRow``
    of that version, or the checkpoint's own inline values)."""
    checkpoint: bytes | None = None
    """The serialized checkpoint (decompressed) when of a ``SHOWN_TYPES`` type and at
    most ``SHOWN_VALUE_BYTES``: it holds the small channel values inline."""


@dataclass(frozen=True)
class WriteRow:
    """A pending write as a viewer lists it: the value's bytes only when of a
    ``SHOWN_TYPES`` type and at most ``SHOWN_VALUE_BYTES`` (else None: show its type and
    size)."""

    checkpoint_ns: str
    """The checkpoint's namespace."""
    checkpoint_id: str
    """The checkpoint the write is pending on."""
    task_id: str
    """The task that wrote it."""
    idx: int
    """Its index (negative for special channels: error, interrupt, resume...)."""
    channel: str
    """The channel written."""
    type: str
    """The serializer's type tag, as stored (``+zlib`` at its end when stored
    compressed)."""
    size: int
    """The serialized value's size in bytes, as stored."""
    value: bytes | None
    """The serialized value (decompressed) when of a ``SHOWN_TYPES`` type and at most
    ``SHOWN_VALUE_BYTES``."""


@dataclass(frozen=True)
class ValueRow:
    """A channel's value at one version, as a viewer lists it: the bytes only when of a
    ``SHOWN_TYPES`` type and at most ``SHOWN_VALUE_BYTES`` (else None: show its type and
    size)."""

    checkpoint_ns: str
    """The namespace the channel belongs to."""
    channel: str
    """The channel."""
    version: str
    """The channel's version (as text)."""
    type: str
    """The serializer's type tag, as stored (``empty``: the channel has no value)."""
    size: int
    """The serialized value's size in bytes, as stored."""
    value: bytes | None
    """The serialized value (decompressed) when shown."""


@dataclass(frozen=True)
class SessionRows:
    """A thread's newest checkpoints (newest first, across namespaces), the pending
    writes on them and their channel values, as ``LangGraphRepository.session_rows``
    reads them."""

    checkpoints: list[CheckpointRow]
    """Newest first, at most the limit asked for."""
    writes: list[WriteRow]
    """Writes pending on those checkpoints, at most the limit asked for."""
    more: bool
    """Whether the thread has older checkpoints than those read."""
    values: list[ValueRow] = field(default_factory=list)
    """The channel values at the versions those checkpoints name (each version once),
    at most the limit asked for."""
