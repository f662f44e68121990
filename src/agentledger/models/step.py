"""AgentStep: one model call or tool call of a run."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    BigInteger,
    ForeignKey,
    Index,
    Integer,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from .._limits import MAX_ROW_KEY_LENGTH
from .base import MYSQL_TABLE_ARGS, Base
from .types import BigIntId, Identifier, JSONDocument, PlainText, ShortText, UTCDateTime

if TYPE_CHECKING:
    from .session import AgentSession


class AgentStep(Base):
    """A step row of ``agentledger_steps``: the append-only trace of a session's runs."""

    __tablename__ = "agentledger_steps"

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    """Surrogate key; order is ``seq``, not ``id``."""
    session_id: Mapped[str] = mapped_column(
        Identifier(128), ForeignKey("agentledger_sessions.id", ondelete="CASCADE")
    )
    """The session the step belongs to; deleted with it."""
    seq: Mapped[int] = mapped_column(Integer)
    """Position in the session's trace: 1, 2, 3... taken from the session row's counter
    under its row lock, so concurrent appenders get contiguous seqs."""
    step_index: Mapped[int] = mapped_column(Integer)
    """The index the harness recorded; stored as given and not unique (loops reuse them)."""
    run_id: Mapped[str | None] = mapped_column(Identifier(128))
    """The run (one turn of the agent loop) the step belongs to, if the harness names runs."""
    kind: Mapped[str] = mapped_column(ShortText(32))
    """``model`` for a model call, ``tool`` for a tool call, or a harness's own kind."""
    name: Mapped[str | None] = mapped_column(ShortText(255))
    """The tool's name for a tool step; free for other kinds."""
    model: Mapped[str | None] = mapped_column(ShortText(255))
    """The model that answered a model step."""
    input: Mapped[Any] = mapped_column(JSONDocument(none_as_null=True), nullable=True)
    """What the step was given (JSON), if recorded."""
    output: Mapped[Any] = mapped_column(JSONDocument(none_as_null=True), nullable=True)
    """What the step produced (JSON), if recorded."""
    tool_calls: Mapped[Any] = mapped_column(JSONDocument(none_as_null=True), nullable=True)
    """Tool calls a model step asked for (JSON), if any."""
    input_tokens: Mapped[int] = mapped_column(BigInteger)
    """Input tokens the provider reported (0 when not reported)."""
    output_tokens: Mapped[int] = mapped_column(BigInteger)
    """Output tokens the provider reported."""
    total_tokens: Mapped[int] = mapped_column(BigInteger)
    """Total tokens as the provider reported them (not always input + output)."""
    usage_extra: Mapped[dict[str, int] | None] = mapped_column(JSONDocument(none_as_null=True))
    """Further counters the provider reported, such as cached or reasoning tokens."""
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    """When the step started (UTC)."""
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """When the step ended, if it did."""
    error: Mapped[str | None] = mapped_column(PlainText())
    """The error the step ended with, if any."""
    external_key: Mapped[str | None] = mapped_column(Identifier(MAX_ROW_KEY_LENGTH))
    """The caller's key for the step, unique per session: appending a key again returns
    the stored step (an idempotent retry)."""

    session: Mapped[AgentSession] = relationship(back_populates="steps", lazy="raise")
    """The owning session."""

    __table_args__ = (
        UniqueConstraint("session_id", "seq"),
        # Token usage over a period (steps.usage(since=..., model=...)): revision 0002.
        Index(None, "started_at", "model"),
        # Idempotent appends, steps by run and by kind (revision 0003).
        UniqueConstraint("session_id", "external_key"),
        Index(None, "session_id", "run_id", "seq"),
        Index(None, "session_id", "kind", "seq"),
        MYSQL_TABLE_ARGS,
    )
