"""Frozen pydantic records: what the API takes and gives back, never live ORM rows.

Records are built inside the unit of work, so nothing lazy-loads after it ends.
Edit one with ``record.model_copy(update={...})``; the repository validates what it
writes, so an edited copy is checked when it is saved.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

RunStatus = Literal["completed", "failed", "cancelled", "interrupted"]
"""How a run ended: ``completed`` (answered), ``failed`` (an error stopped it),
``cancelled`` (the user or harness stopped it), ``interrupted`` (paused, waiting for a
tool result or a human answer; a checkpoint holds what it needs to resume)."""

SESSION_STATUSES: tuple[str, ...] = ("active", "completed", "failed", "cancelled", "interrupted")
"""A session is ``active`` until its first run is finalized, then it carries the last
run's status."""


class Record(BaseModel):
    """Base of every record: frozen, strict about unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class TokenUsage(Record):
    """Token counts as the provider reported them.

    ``total_tokens`` is stored as reported (some providers count more than input plus
    output); ``extra`` keeps further counters such as cached or reasoning tokens.
    """

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    total_tokens: int = Field(default=0, ge=0)
    extra: dict[str, int] = Field(default_factory=dict)


class RunSummary(Record):
    """The outcome of one run, recorded on the session by ``sessions.finalize``."""

    status: RunStatus
    model: str | None = Field(default=None, max_length=255)
    usage: TokenUsage = Field(default_factory=TokenUsage)
    error: str | None = None
    ended_at: AwareDatetime | None = None


class SessionRecord(Record):
    """Every column of a session row (and none of its messages).

    ``revision`` is what ``save`` checks: it succeeds only while the stored revision
    is still this one.
    """

    id: str
    app_name: str | None
    user_id: str | None
    title: str | None
    model: str | None
    status: str
    state: dict[str, Any]
    message_count: int
    message_seq: int
    step_count: int
    checkpoint_seq: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    last_run: RunSummary | None
    latest_checkpoint_ref: str | None
    preview: str | None
    created_at: datetime
    updated_at: datetime
    revision: int


class SessionSummary(Record):
    """A listing row: what a person needs to recognise a session, without its content.

    ``title`` is the session's title, or its opening user message when it has none.
    """

    id: str
    title: str | None
    app_name: str | None
    user_id: str | None
    model: str | None
    status: str
    message_count: int
    step_count: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    created_at: datetime
    updated_at: datetime


T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a listing; pass ``next_cursor`` back to get the next (None: the end)."""

    model_config = ConfigDict(frozen=True)

    items: list[T]
    next_cursor: str | None
