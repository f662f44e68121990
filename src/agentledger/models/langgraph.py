"""LangGraph's checkpoints, channel values and pending writes, in the shape of its
access paths (``agentledger.integrations.langgraph`` reads and writes them).

A LangGraph thread is an agentledger session (its thread id is the session's external
key), so every row hangs off ``agentledger_sessions`` and is deleted with it. Values
are what LangGraph's serializer gives, a type tag and bytes, stored as bytes; those of
at least 1 KB that zlib shrinks by a tenth or more are stored compressed, their type
tag ending in ``+zlib`` (``repositories.langgraph.COMPRESSED``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, Integer
from sqlalchemy.orm import Mapped, mapped_column

from .._limits import MAX_CHANNEL_LENGTH as MAX_CHANNEL_LENGTH
from .._limits import MAX_CHECKPOINT_ID_LENGTH as MAX_CHECKPOINT_ID_LENGTH
from .._limits import MAX_NAMESPACE_LENGTH as MAX_NAMESPACE_LENGTH
from .._limits import MAX_TASK_ID_LENGTH as MAX_TASK_ID_LENGTH
from .._limits import MAX_TYPE_LENGTH as MAX_TYPE_LENGTH
from .._limits import MAX_VERSION_LENGTH as MAX_VERSION_LENGTH
from .base import MYSQL_TABLE_ARGS, Base
from .types import (
    Binary,
    Identifier,
    JSONDocument,
    JSONState,
    OrderedIdentifier,
    PlainText,
    ShortText,
    UTCDateTime,
    nonclustered_primary_key,
)

_SESSION_FK = "agentledger_sessions.id"


def _session_id() -> Mapped[str]:
    return mapped_column(
        Identifier(128), ForeignKey(_SESSION_FK, ondelete="CASCADE"), primary_key=True
    )


class AgentLangGraphCheckpoint(Base):
    """A LangGraph checkpoint row of ``agentledger_langgraph_checkpoints``: the checkpoint
    without its channel values, which live in ``agentledger_langgraph_blobs``."""

    __tablename__ = "agentledger_langgraph_checkpoints"

    session_id: Mapped[str] = _session_id()
    """The thread's session; deleted with it."""
    checkpoint_ns: Mapped[str] = mapped_column(
        OrderedIdentifier(MAX_NAMESPACE_LENGTH), primary_key=True
    )
    """The namespace: empty for the root graph, a path for a subgraph."""
    checkpoint_id: Mapped[str] = mapped_column(
        OrderedIdentifier(MAX_CHECKPOINT_ID_LENGTH), primary_key=True
    )
    """LangGraph's checkpoint id (time-ordered: the newest is the greatest)."""
    parent_checkpoint_id: Mapped[str | None] = mapped_column(
        OrderedIdentifier(MAX_CHECKPOINT_ID_LENGTH)
    )
    """The checkpoint this one was written from (LangGraph's own parent id); not a
    foreign key, since a parent may be pruned while its children stay."""
    run_id: Mapped[str | None] = mapped_column(Identifier(255))
    """The run that wrote it (``metadata["run_id"]``), for ``delete_for_runs``."""
    type: Mapped[str] = mapped_column(ShortText(MAX_TYPE_LENGTH))
    """The serializer's type tag of ``checkpoint`` (``+zlib`` at its end: compressed)."""
    checkpoint: Mapped[bytes] = mapped_column(Binary())
    """The checkpoint as serialized, its channel values left out."""
    channel_versions: Mapped[dict[str, Any]] = mapped_column(JSONDocument())
    """Channel -> version (as text): which blobs make up the channel values."""
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONState())
    """The checkpoint's metadata (JSON; JSONB on PostgreSQL), filtered on in SQL."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    """When it was stored (UTC)."""

    __table_args__ = (
        # A thread's checkpoints newest first across its namespaces, in list's order
        # (checkpoint id, then namespace), so a page reads only its rows (0005).
        Index(
            "ix_agentledger_langgraph_checkpoints_newest",
            "session_id",
            "checkpoint_id",
            "checkpoint_ns",
        ),
        Index(None, "run_id"),
        MYSQL_TABLE_ARGS,
    )


class AgentLangGraphBlob(Base):
    """One channel's value at one version, of ``agentledger_langgraph_blobs``: stored once,
    shared by every checkpoint of the namespace at that version."""

    __tablename__ = "agentledger_langgraph_blobs"

    session_id: Mapped[str] = _session_id()
    """The thread's session; deleted with it."""
    checkpoint_ns: Mapped[str] = mapped_column(
        OrderedIdentifier(MAX_NAMESPACE_LENGTH), primary_key=True
    )
    """The namespace the channel belongs to."""
    channel: Mapped[str] = mapped_column(Identifier(MAX_CHANNEL_LENGTH), primary_key=True)
    """The channel's name."""
    version: Mapped[str] = mapped_column(Identifier(MAX_VERSION_LENGTH), primary_key=True)
    """The channel's version (as text)."""
    type: Mapped[str] = mapped_column(ShortText(MAX_TYPE_LENGTH))
    """The serializer's type tag (``+zlib`` at its end: ``blob`` is compressed);
    ``empty`` for a channel without a value."""
    blob: Mapped[bytes | None] = mapped_column(Binary())
    """The serialized value (NULL when empty)."""

    __table_args__ = (
        # Wider than SQL Server's 900 bytes of clustered key: nonclustered there.
        nonclustered_primary_key("session_id", "checkpoint_ns", "channel", "version"),
        MYSQL_TABLE_ARGS,
    )


class AgentLangGraphWrite(Base):
    """A pending write of a task, of ``agentledger_langgraph_writes``."""

    __tablename__ = "agentledger_langgraph_writes"

    session_id: Mapped[str] = _session_id()
    """The thread's session; deleted with it."""
    checkpoint_ns: Mapped[str] = mapped_column(
        OrderedIdentifier(MAX_NAMESPACE_LENGTH), primary_key=True
    )
    """The checkpoint's namespace."""
    checkpoint_id: Mapped[str] = mapped_column(
        OrderedIdentifier(MAX_CHECKPOINT_ID_LENGTH), primary_key=True
    )
    """The checkpoint the write is pending on."""
    task_id: Mapped[str] = mapped_column(Identifier(MAX_TASK_ID_LENGTH), primary_key=True)
    """The task that wrote it."""
    idx: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    """Its index among the task's writes; negative for LangGraph's special channels
    (error, interrupt, resume...), which a later write of the task replaces."""
    channel: Mapped[str] = mapped_column(Identifier(MAX_CHANNEL_LENGTH))
    """The channel written."""
    type: Mapped[str] = mapped_column(ShortText(MAX_TYPE_LENGTH))
    """The serializer's type tag of ``blob`` (``+zlib`` at its end: compressed)."""
    blob: Mapped[bytes] = mapped_column(Binary())
    """The serialized value."""
    task_path: Mapped[str] = mapped_column(PlainText())
    """The task's path (LangGraph orders a step's writes by it)."""

    __table_args__ = (
        # Wider than SQL Server's 900 bytes of clustered key: nonclustered there.
        nonclustered_primary_key("session_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"),
        MYSQL_TABLE_ARGS,
    )
