"""AgentCheckpoint: what a paused run needs to resume."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import ForeignKey, Index, Integer, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from .base import MYSQL_TABLE_ARGS, Base
from .types import Identifier, JSONDocument, UTCDateTime

if TYPE_CHECKING:
    from .session import AgentSession


class AgentCheckpoint(Base):
    """A checkpoint row of ``agentledger_checkpoints``. Immutable once written."""

    __tablename__ = "agentledger_checkpoints"

    ref: Mapped[str] = mapped_column(Identifier(64), primary_key=True)
    """Globally unique reference, sortable by creation time."""
    session_id: Mapped[str] = mapped_column(
        Identifier(128), ForeignKey("agentledger_sessions.id", ondelete="CASCADE")
    )
    """The session the checkpoint belongs to; deleted with it."""
    seq: Mapped[int] = mapped_column(Integer)
    """Position among the session's checkpoints: the newest has the highest."""
    parent_ref: Mapped[str | None] = mapped_column(Identifier(64))
    """The checkpoint this one continues from (lineage); not a foreign key, since a
    parent may be pruned while its children stay."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    """When it was saved (UTC)."""
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """After this it is no longer returned as the latest and may be purged."""
    size: Mapped[int] = mapped_column(Integer)
    """Size of the payload's JSON text in bytes (shown by listings, which skip the payload)."""
    payload: Mapped[dict[str, Any]] = mapped_column(JSONDocument())
    """The checkpoint payload (JSON text): context window, pending tool calls, state."""

    session: Mapped[AgentSession] = relationship(back_populates="checkpoints", lazy="raise")
    """The owning session."""

    __table_args__ = (
        UniqueConstraint("session_id", "seq"),
        Index(None, "expires_at"),
        MYSQL_TABLE_ARGS,
    )
