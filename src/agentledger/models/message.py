"""AgentMessage: one message of a session's conversation."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import ForeignKey, Index, Integer, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from .._limits import MAX_ROLE_LENGTH as MAX_ROLE_LENGTH
from .._limits import MAX_ROW_KEY_LENGTH as MAX_ROW_KEY_LENGTH
from .base import MYSQL_TABLE_ARGS, Base
from .types import BigIntId, Identifier, JSONDocument, ShortText, UTCDateTime

if TYPE_CHECKING:
    from .session import AgentSession


class AgentMessage(Base):
    """A message row of ``agentledger_messages``, ordered by ``seq`` within its session."""

    __tablename__ = "agentledger_messages"

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    """Surrogate key; says nothing about order (commit order is not id order)."""
    session_id: Mapped[str] = mapped_column(
        Identifier(128), ForeignKey("agentledger_sessions.id", ondelete="CASCADE")
    )
    """The session the message belongs to; deleted with it."""
    seq: Mapped[int] = mapped_column(Integer)
    """Position in the conversation: starts at 1, strictly increases, never reused."""
    role: Mapped[str] = mapped_column(ShortText(MAX_ROLE_LENGTH))
    """Who spoke: ``user``, ``assistant``, ``system``, ``tool`` or a harness's own role
    (an agent's name, say); up to 255 characters."""
    content: Mapped[Any] = mapped_column(JSONDocument())
    """The message content: any JSON value, stored as text so it round-trips exactly."""
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONDocument())
    """Caller metadata (a JSON object): ids from the provider, attachments, flags."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    """When the message was appended, or the time the caller gave it (UTC, microseconds);
    ``seq``, not this, orders the conversation."""
    external_key: Mapped[str | None] = mapped_column(Identifier(MAX_ROW_KEY_LENGTH))
    """The caller's key for the message (a framework's item or event id), unique per
    session: appending a key again returns the stored message (an idempotent retry)."""

    session: Mapped[AgentSession] = relationship(back_populates="messages", lazy="raise")
    """The owning session. Declared so a flush updates the session row (and checks its
    revision) before inserting messages."""

    __table_args__ = (
        UniqueConstraint("session_id", "seq"),
        # Idempotent appends and reads by time (revision 0003).
        UniqueConstraint("session_id", "external_key"),
        Index(None, "session_id", "created_at", "seq"),
        MYSQL_TABLE_ARGS,
    )
