"""AgentGrant: a capability the user approved for a session."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import ForeignKey, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from .._limits import MAX_CAPABILITY_LENGTH as MAX_CAPABILITY_LENGTH
from .base import MYSQL_TABLE_ARGS, Base
from .types import BigIntId, Identifier, ShortText, UTCDateTime

if TYPE_CHECKING:
    from .session import AgentSession


class AgentGrant(Base):
    """A grant row of ``agentledger_grants``. Only approvals are stored, never refusals."""

    __tablename__ = "agentledger_grants"

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    """Surrogate key."""
    session_id: Mapped[str] = mapped_column(
        Identifier(128), ForeignKey("agentledger_sessions.id", ondelete="CASCADE")
    )
    """The session the grant belongs to; deleted with it."""
    capability: Mapped[str] = mapped_column(Identifier(MAX_CAPABILITY_LENGTH))
    """What was approved (a tool name, a command, a prompt): up to 4,096 characters,
    compared exactly."""
    capability_hash: Mapped[str] = mapped_column(Identifier(64))
    """SHA-256 (hex) of ``capability``: the unique key, since a 4,096-character string is
    beyond MySQL's index key limit."""
    granted_by: Mapped[str | None] = mapped_column(ShortText(255))
    """Who approved it, if known."""
    granted_at: Mapped[datetime] = mapped_column(UTCDateTime())
    """When it was approved last (granting again refreshes it)."""
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """When the approval lapses; never, when empty."""

    session: Mapped[AgentSession] = relationship(back_populates="grants", lazy="raise")
    """The owning session."""

    __table_args__ = (UniqueConstraint("session_id", "capability_hash"), MYSQL_TABLE_ARGS)
