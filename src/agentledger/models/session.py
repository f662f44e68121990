"""AgentSession: one conversation, its state, counters and last run."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import BigInteger, Index, Integer, UniqueConstraint
from sqlalchemy.orm import Mapped, WriteOnlyMapped, mapped_column, relationship

from .._limits import MAX_EXTERNAL_KEY_LENGTH as MAX_EXTERNAL_KEY_LENGTH
from .._limits import MAX_SCOPE_LENGTH as MAX_SCOPE_LENGTH
from .base import MYSQL_TABLE_ARGS, Base
from .types import Identifier, JSONDocument, JSONState, ShortText, UTCDateTime

if TYPE_CHECKING:
    from .checkpoint import AgentCheckpoint
    from .grant import AgentGrant
    from .message import AgentMessage
    from .step import AgentStep


class AgentSession(Base):
    """A session (conversation) row of ``agentledger_sessions``.

    ``revision`` is the ``version_id_col``: every ORM UPDATE or DELETE of this row
    carries ``AND revision = :old`` and bumps it, so a stale writer is caught.
    Writers that change what a caller wrote (title, model, state, the conversation)
    must go through the version check; the counters and the last run are written
    with plain UPDATEs that leave ``revision`` alone. An out-of-band writer that
    changes title, model or state must ``SET revision = revision + 1`` too.
    """

    __tablename__ = "agentledger_sessions"

    id: Mapped[str] = mapped_column(Identifier(128), primary_key=True)
    """Session id: 1-128 ASCII letters, digits, ``_ - .``; case-sensitive on every dialect."""
    app_name: Mapped[str | None] = mapped_column(Identifier(MAX_SCOPE_LENGTH))
    """Optional scope: the application that owns the session (1-255 characters of any
    text, compared exactly; revision 0003 widened it from an id)."""
    user_id: Mapped[str | None] = mapped_column(Identifier(MAX_SCOPE_LENGTH))
    """Optional scope: the end user the session belongs to (1-255 characters of any text,
    an email say, compared exactly)."""
    external_key: Mapped[str | None] = mapped_column(Identifier(MAX_EXTERNAL_KEY_LENGTH))
    """The caller's own key for the session (a framework's thread or session id): up to
    1,024 characters of any text, unique within (app_name, user_id); compared exactly."""
    external_key_hash: Mapped[str | None] = mapped_column(Identifier(64))
    """SHA-256 (hex) of (app_name, user_id, external_key): the unique key of a keyed
    session, since NULL scopes are distinct in a unique constraint and 1,024 characters
    are beyond MariaDB's index key limit. NULL for a session without a key."""
    title: Mapped[str | None] = mapped_column(ShortText(512))
    """A human title; listings fall back to ``preview`` when it is empty."""
    model: Mapped[str | None] = mapped_column(ShortText(255))
    """The model the session talks to, as the caller names it."""
    status: Mapped[str] = mapped_column(ShortText(32))
    """``active`` until a run is finalized, then the last run's status
    (``completed``, ``failed``, ``cancelled`` or ``interrupted``)."""
    state: Mapped[dict[str, Any]] = mapped_column(JSONState())
    """The harness's key/value state: a JSON object (JSONB on PostgreSQL)."""
    message_count: Mapped[int] = mapped_column(Integer)
    """How many messages the conversation holds now."""
    message_seq: Mapped[int] = mapped_column(Integer)
    """The highest message ``seq`` ever issued; a replace continues after it."""
    step_count: Mapped[int] = mapped_column(Integer)
    """How many steps were recorded; also the highest step ``seq`` issued."""
    checkpoint_seq: Mapped[int] = mapped_column(Integer)
    """The highest checkpoint ``seq`` ever issued."""
    input_tokens: Mapped[int] = mapped_column(BigInteger)
    """Sum of the input tokens of every step."""
    output_tokens: Mapped[int] = mapped_column(BigInteger)
    """Sum of the output tokens of every step."""
    total_tokens: Mapped[int] = mapped_column(BigInteger)
    """Sum of the total tokens of every step, as the providers reported them."""
    last_run: Mapped[dict[str, Any] | None] = mapped_column(JSONDocument(none_as_null=True))
    """The summary of the last finalized run (status, model, usage, error, ended_at)."""
    latest_checkpoint_ref: Mapped[str | None] = mapped_column(Identifier(64))
    """The ref of the newest checkpoint; the compare-and-set target of a resume."""
    preview: Mapped[str | None] = mapped_column(ShortText(256))
    """The opening user message, shortened: how a person recognises the session."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    """When the session was created (UTC, microseconds)."""
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    """When anything of the session last changed; listings sort by it."""
    revision: Mapped[int] = mapped_column(Integer)
    """Optimistic-concurrency version: 1 at creation, one more per versioned write."""

    messages: WriteOnlyMapped[AgentMessage] = relationship(
        back_populates="session", passive_deletes=True, order_by="AgentMessage.seq"
    )
    """The conversation, read through ``.select()``: never loaded as a collection."""
    steps: WriteOnlyMapped[AgentStep] = relationship(
        back_populates="session", passive_deletes=True, order_by="AgentStep.seq"
    )
    """The step trace, read through ``.select()``."""
    grants: WriteOnlyMapped[AgentGrant] = relationship(
        back_populates="session", passive_deletes=True
    )
    """Approved capabilities, read through ``.select()``."""
    checkpoints: WriteOnlyMapped[AgentCheckpoint] = relationship(
        back_populates="session", passive_deletes=True, order_by="AgentCheckpoint.seq"
    )
    """Saved checkpoints, read through ``.select()``."""

    __mapper_args__ = {"version_id_col": revision}
    __table_args__ = (
        Index(None, "updated_at", "id"),
        Index(None, "app_name", "updated_at", "id"),
        Index(None, "user_id", "updated_at", "id"),
        Index(None, "status", "updated_at", "id"),
        # Look-ups by external key (revision 0003).
        UniqueConstraint("external_key_hash"),
        MYSQL_TABLE_ARGS,
    )
