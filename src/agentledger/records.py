"""Frozen pydantic records: what the API takes and gives back, never live ORM rows.

Records are built inside the unit of work, so nothing lazy-loads after it ends.
Edit one with ``record.model_copy(update={...})``; the repository validates what it
writes, so an edited copy is checked when it is saved.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Generic, Literal, Self, TypeVar

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter, field_validator
from pydantic import ValidationError as PydanticValidationError

from ._checks import scope_value
from .clock import utc
from .errors import RecordValidationError, ValidationError
from .ids import validate_id

RunStatus = Literal["completed", "failed", "cancelled", "interrupted"]
"""How a run ended: ``completed`` (answered), ``failed`` (an error stopped it),
``cancelled`` (the user or harness stopped it), ``interrupted`` (paused, waiting for a
tool result or a human answer; a checkpoint holds what it needs to resume)."""

SESSION_STATUSES: tuple[str, ...] = ("active", "completed", "failed", "cancelled", "interrupted")
"""A session is ``active`` until its first run is finalized, then it carries the last
run's status."""


T = TypeVar("T")
_MISSING: Any = object()
_set_attribute = object.__setattr__


class Record(BaseModel):
    """Base of every record: frozen, strict about unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, **data: Any) -> None:
        """Validate ``data``; RecordValidationError (agentledger's ValidationError, also
        pydantic's) names every field that breaks a rule."""
        try:
            super().__init__(**data)
        except PydanticValidationError as error:
            raise RecordValidationError.of(error) from None

    @classmethod
    def model_validate(cls, obj: Any, **options: Any) -> Self:
        """Pydantic's ``model_validate``, raising RecordValidationError."""
        try:
            return super().model_validate(obj, **options)
        except PydanticValidationError as error:
            raise RecordValidationError.of(error) from None

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **options: Any) -> Self:
        """Pydantic's ``model_validate_json``, raising RecordValidationError."""
        try:
            return super().model_validate_json(json_data, **options)
        except PydanticValidationError as error:
            raise RecordValidationError.of(error) from None


RecordT = TypeVar("RecordT", bound=BaseModel)


def stored_maker(cls: type[RecordT]) -> Callable[[dict[str, Any]], RecordT]:
    """A function making ``cls`` records from stored values without validating them
    again (see ``from_stored``); made once per class, so a loop over many rows pays
    one call a row and no lookups."""
    new = cls.__new__
    fields_set = set(cls.model_fields)

    def make(values: dict[str, Any]) -> RecordT:
        record = new(cls)
        _set_attribute(record, "__dict__", values)
        # Shared: pydantic copies it before changing it (model_copy); records are frozen.
        _set_attribute(record, "__pydantic_fields_set__", fields_set)
        _set_attribute(record, "__pydantic_extra__", None)
        _set_attribute(record, "__pydantic_private__", None)
        return record

    return make


_MAKERS: dict[type[BaseModel], Callable[[dict[str, Any]], Any]] = {}


def from_stored(cls: type[RecordT], values: dict[str, Any]) -> RecordT:
    """A ``cls`` record holding ``values`` as they are, without validating them again.

    Only for what agentledger reads back from its own columns: every value was
    validated when it was written, and comes back typed by its column (ints, aware UTC
    datetimes, JSON that the repository decoded and checked). Validating each row
    again cost as much as reading it (twice the time of loading a long conversation);
    the result is equal to a validated record. ``values`` names every field of
    ``cls``, in declaration order.
    """
    make = _MAKERS.get(cls)
    if make is None:
        make = _MAKERS.setdefault(cls, stored_maker(cls))
    return make(values)  # type: ignore[no-any-return]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while the records of one read are built.

    Every record is a new tracked object that survives the collections its own
    allocations trigger, so building thousands of them promotes each through the
    generations and sets off full collections of the whole heap: measured, a third
    of loading 5,000 messages in a process holding SQLAlchemy and pydantic (docs/
    benchmarks.md, "Rows to records"). Nothing here makes cycles; the collector runs
    as usual after. A collector the application turned off stays off; one turned
    off by another thread while this runs is turned back on at its end (the
    collector's switch is one per process).
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class TokenUsage(Record):
    """Token counts as the provider reported them.

    ``total_tokens`` is stored as reported (some providers count more than input plus
    output); ``extra`` keeps further counters such as cached or reasoning tokens.
    A step's counts are at most 2**63 - 1 (BIGINT columns; ``steps.append`` refuses
    more); the totals ``steps.usage`` sums over many sessions may pass it.
    """

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    total_tokens: int = Field(default=0, ge=0)
    extra: dict[str, int] = Field(default_factory=dict)


class UsageGroup(Record):
    """The token totals of one group of steps (``steps.usage_by``): a UTC day
    (``YYYY-MM-DD``), a model or a user; ``key`` is None for steps without one."""

    key: str | None
    steps: int
    usage: TokenUsage


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
    external_key: str | None
    """The caller's own key (a framework's thread or session id), unique within
    (app_name, user_id); set when the session is created, never changed."""
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

    def state_as(self, key: str, type_: type[T] | Any, default: Any = _MISSING) -> Any:
        """The state value at ``key`` decoded as ``type_`` (a pydantic model, a dataclass,
        ``list[int]``...): ``record.state_as("plan", Plan)``.

        Raises:
            agentledger.ValidationError: the key is missing (and no default was given), or
                the value does not fit ``type_``; the message names the key.
        """
        if key not in self.state:
            if default is not _MISSING:
                return default
            raise ValidationError(f"state has no key {key!r}", path=f"state[{key!r}]")
        try:
            return TypeAdapter(type_).validate_python(self.state[key])
        except PydanticValidationError as error:
            raise ValidationError(
                f"state[{key!r}] is not a valid {getattr(type_, '__name__', type_)}: {error}",
                path=f"state[{key!r}]",
            ) from None


class SessionSummary(Record):
    """A listing row: what a person needs to recognise a session, without its content.

    ``title`` is the session's title, or its opening user message when it has none.
    ``external_key``, ``state`` and ``last_message_at`` are filled only when the listing
    asked for them (``include=``), and are None otherwise.
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
    external_key: str | None = None
    state: dict[str, Any] | None = None
    last_message_at: datetime | None = None
    """The newest message's ``created_at`` (None: no message, or not included)."""


class NewMessage(Record):
    """A message to append: who spoke, what was said (any JSON value), and metadata.

    ``created_at`` is the caller's own time for the message (aware; naive is refused),
    else the ledger's clock. ``external_key`` is the caller's id for it (up to 255
    characters), unique per session: appending a stored key again returns the stored
    message and changes nothing (``ConflictError`` reason ``duplicate`` when the
    content differs), so a retried append is safe.
    """

    role: str = Field(min_length=1, max_length=255)
    content: Any = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime | None = None
    external_key: str | None = None


class Message(Record):
    """A stored message: its place in the conversation (``seq``) and what was said."""

    seq: int
    role: str
    content: Any
    metadata: dict[str, Any]
    created_at: datetime
    external_key: str | None = None


StepKind = str
"""``model`` (a model call), ``tool`` (a tool call), or a harness's own kind."""


class NewStep(Record):
    """A step to record: one model call or tool call of a run.

    ``step_index`` is stored as the harness numbered it (loops may reuse numbers); the
    order of steps is their ``seq``, given on append.
    """

    step_index: int = Field(default=0, ge=-(2**31), le=2**31 - 1)
    kind: str = Field(default="model", min_length=1, max_length=32)
    run_id: str | None = None
    name: str | None = Field(default=None, max_length=255)
    model: str | None = Field(default=None, max_length=255)
    input: Any = None
    output: Any = None
    tool_calls: Any = None
    usage: TokenUsage = Field(default_factory=TokenUsage)
    started_at: AwareDatetime | None = None
    ended_at: AwareDatetime | None = None
    error: str | None = None
    external_key: str | None = None
    """The caller's id for the step (up to 255 characters), unique per session: appending
    a stored key again returns the stored step and changes nothing."""


class Step(Record):
    """A recorded step, with its place in the session's trace (``seq``)."""

    session_id: str
    seq: int
    step_index: int
    kind: str
    run_id: str | None
    name: str | None
    model: str | None
    input: Any
    output: Any
    tool_calls: Any
    usage: TokenUsage
    started_at: datetime
    ended_at: datetime | None
    error: str | None
    external_key: str | None = None


class Grant(Record):
    """A capability the user approved for a session; refusals are never stored."""

    session_id: str
    capability: str
    granted_by: str | None
    granted_at: datetime
    expires_at: datetime | None


class Appended(Record):
    """What ``messages.append`` did: the session at its new revision and the messages
    of the call as stored, with their seqs, in the order given (a message whose key
    was already stored is the stored one)."""

    session: SessionRecord
    messages: list[Message]


class Conversation(Record):
    """What ``messages.conversation`` read, in one transaction: the session and its
    messages (all of them, or the newest ``last``) in seq order, as of one snapshot, so
    ``session.message_count`` and ``session.revision`` agree with ``messages``."""

    session: SessionRecord
    messages: list[Message]


class Popped(Record):
    """What ``messages.pop`` did: the session at its new revision and the messages it
    removed, in seq order (empty when the conversation was)."""

    session: SessionRecord
    messages: list[Message]


class StateDelta(Record):
    """A change to a key/value state: top-level keys to set (JSON values) and keys to
    delete. A merge applies it to the stored state under the row lock, so concurrent
    merges never lose one another's keys."""

    set: dict[str, Any] = Field(default_factory=dict)
    delete: list[str] = Field(default_factory=list)


class AppState(Record):
    """The state shared by every session of one application (ADK's ``app:`` keys).

    An application nothing was stored for reads as empty state at revision 0, with no
    times. ``revision`` is what ``save`` checks.
    """

    app_name: str
    state: dict[str, Any]
    revision: int
    created_at: datetime | None
    updated_at: datetime | None


class UserState(Record):
    """The state shared by every session of one user of an application (ADK's
    ``user:`` keys); empty at revision 0 until something is stored."""

    app_name: str
    user_id: str
    state: dict[str, Any]
    revision: int
    created_at: datetime | None
    updated_at: datetime | None


class MemoryItem(Record):
    """An item of long-term memory: a JSON object under a namespace and a key.

    ``revision`` is what a compare-and-set ``put`` checks (``expected_revision``).
    ``score`` is set by a search by meaning (the closest of the item's vectors to the
    query, by cosine similarity: higher is closer) and None otherwise.
    """

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    text: str | None
    created_at: datetime
    updated_at: datetime
    ttl_minutes: float | None
    expires_at: datetime | None
    revision: int
    score: float | None = None


class Page(BaseModel, Generic[T]):
    """One page of a listing; pass ``next_cursor`` back to get the next (None: the end)."""

    model_config = ConfigDict(frozen=True)

    items: list[T]
    next_cursor: str | None


class PendingToolCall(Record):
    """A tool call a paused run is waiting on: the call as the model made it, and
    whether an interrupt (a human approval, say) is holding it."""

    tool_call: dict[str, Any]
    interrupt_active: bool = False


class CheckpointPayload(Record):
    """Everything a paused run needs to resume exactly where it stopped; JSON only.

    Every field defaults to empty. ``context_window`` takes NewMessage values (a
    ``Message`` read from ``messages`` is accepted and kept as its role, content and
    metadata). The repository checks the whole payload as JSON, within
    ``Limits.max_checkpoint_bytes``, before it writes anything.
    """

    context_window: list[NewMessage] = Field(default_factory=list)
    """The messages the model sees when the run resumes."""
    pending_tool_calls: dict[str, PendingToolCall] = Field(default_factory=dict)
    """Tool calls still waiting for a result, by tool-call id."""
    interrupt_requesters: dict[str, str] = Field(default_factory=dict)
    """Who raised each interrupt, by interrupt id."""
    runtime_state: dict[str, Any] = Field(default_factory=dict)
    """The harness's own state (a JSON object)."""
    pending_interrupts: Any = None
    """Interrupts still waiting for an answer (any JSON value)."""
    resolved_interrupts: Any = None
    """Interrupts already answered (any JSON value)."""

    @field_validator("context_window", mode="before")
    @classmethod
    def _stored_messages_as_new(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [
                NewMessage(role=item.role, content=item.content, metadata=item.metadata)
                if isinstance(item, Message)
                else item
                for item in value
            ]
        return value


class CheckpointInfo(Record):
    """A checkpoint listing row: where it sits in the session's history, without its
    payload. ``size`` is the payload's size in bytes of UTF-8 JSON text."""

    ref: str
    session_id: str
    seq: int
    parent_ref: str | None
    created_at: datetime
    expires_at: datetime | None
    size: int


class Checkpoint(Record):
    """A stored checkpoint: its reference, place in the session's history, and payload.

    ``parent_ref`` is the checkpoint it continues from (None for the first); ``seq``
    orders a session's checkpoints (the newest has the highest).
    """

    ref: str
    session_id: str
    seq: int
    parent_ref: str | None
    created_at: datetime
    expires_at: datetime | None
    payload: CheckpointPayload


class SessionOverview(Record):
    """A session with the newest of each of its parts (each list in seq order, except
    checkpoints: newest first, unexpired only)."""

    session: SessionRecord
    messages: list[Message]
    steps: list[Step]
    grants: list[Grant]
    """The unexpired grants."""
    checkpoints: list[CheckpointInfo]


class SessionSelection(Record):
    """Which sessions a bulk operation covers (export, copy, purge): every filter given
    must hold. ``updated_since`` is inclusive, ``updated_before`` exclusive."""

    session_ids: tuple[str, ...] | None = None
    app_name: str | None = None
    user_id: str | None = None
    updated_since: datetime | None = None
    updated_before: datetime | None = None

    def __init__(
        self,
        *,
        session_ids: Sequence[str] | None = None,
        app_name: str | None = None,
        user_id: str | None = None,
        updated_since: datetime | None = None,
        updated_before: datetime | None = None,
    ) -> None:
        """Each filter is checked here, before any SQL (ValidationError naming it)."""
        if isinstance(session_ids, str | bytes) or not isinstance(session_ids, Sequence | None):
            raise ValidationError("session_ids takes a list of ids", path="session_ids")
        values: dict[str, Any] = {
            "session_ids": None if session_ids is None else tuple(map(validate_id, session_ids)),
            "app_name": scope_value(app_name, field="app_name"),
            "user_id": scope_value(user_id, field="user_id"),
            "updated_since": _instant(updated_since, "updated_since"),
            "updated_before": _instant(updated_before, "updated_before"),
        }
        super().__init__(**values)


def _instant(value: object, field: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise ValidationError(f"{field} must be a datetime, got {type(value).__name__}", path=field)
    return utc(value, field=field)
