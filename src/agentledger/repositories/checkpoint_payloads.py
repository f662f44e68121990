"""A stored checkpoint's shape and its checks, without I/O: the ref that keys its row,
the payload as ``save`` checks and writes it (a record and its JSON text), and a
row read back as a ``Checkpoint`` record (its payload decoded, and validated unless it
is in the form ``save`` writes). Apart from ``checkpoints`` (the statements and the
operations), so what a row holds reads on its own and the operations read as what
they do."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row

from .._json import Limits, check_json, decode_json
from ..errors import CorruptRecordError, InvalidIdError, ValidationError
from ..ids import validate_id
from ..records import Checkpoint, CheckpointPayload, NewMessage, PendingToolCall, from_stored

_TABLE = "agentledger_checkpoints"
MAX_REF_LENGTH = 64
"""The longest checkpoint ref (its column's size)."""


def checked_ref(value: object, *, what: str = "checkpoint ref") -> str:
    """``value`` if it can be a checkpoint ref (an id of at most 64 characters)."""
    ref = validate_id(value, what=what)
    if len(ref) > MAX_REF_LENGTH:
        raise InvalidIdError(
            f"invalid {what}: at most {MAX_REF_LENGTH} characters, got {len(ref)}", value=value
        )
    return ref


def payload_text(payload: object, limits: Limits) -> tuple[CheckpointPayload, str]:
    """The payload as a record and its JSON text, checked within ``limits``.

    Raises:
        ValidationError: not a payload, not JSON, or over
            ``Limits.max_checkpoint_bytes`` (named by its path).
    """
    if isinstance(payload, dict):
        try:
            payload = CheckpointPayload.model_validate(payload)
        except ValueError as error:
            raise ValidationError(f"payload: {error}", path="payload") from None
    if not isinstance(payload, CheckpointPayload):
        raise ValidationError(
            f"payload must be a CheckpointPayload (or a dict of one), got {type(payload).__name__}",
            path="payload",
        )
    # A context window holds what the model sees: a message's own time and key are
    # not part of it (and a datetime is not JSON).
    window_only = {"context_window": {"__all__": {"created_at", "external_key"}}}
    text = check_json(
        payload.model_dump(exclude=window_only),
        path="payload",
        limits=limits,
        max_bytes=limits.max_checkpoint_bytes,
    )
    return payload, text


def checkpoint_of(row: Row[Any]) -> Checkpoint:
    """A Checkpoint from a row of ``checkpoints._READ``; a payload that does not decode,
    or is not a checkpoint payload, raises CorruptRecordError naming the checkpoint.

    The text is decoded by Python's JSON decoder; a document in exactly the form
    ``save`` writes (every field, each message as role, content and metadata) becomes
    the payload record directly (``_as_stored``), what it was validated as on write.
    Anything else (written by something other than agentledger) is validated whole,
    as pydantic's ``model_validate`` decides."""
    values = dict(row._mapping)
    ref = values["ref"]
    data = decode_json(values["payload"], table=_TABLE, key=ref, column="payload")
    payload = _as_stored(data)
    if payload is None:
        try:
            payload = CheckpointPayload.model_validate(data)
        except ValueError as problem:
            raise _not_a_payload(ref, problem) from None
    values["payload"] = payload
    return from_stored(Checkpoint, values)


_PAYLOAD_FIELDS = tuple(CheckpointPayload.model_fields)
_PAYLOAD_KEYS = frozenset(_PAYLOAD_FIELDS)
_MESSAGE_KEYS = frozenset(("role", "content", "metadata"))
_PENDING_KEYS = frozenset(("tool_call", "interrupt_active"))
_MAX_ROLE_LENGTH = 255
"""``NewMessage.role``'s ``max_length``."""


def _as_stored(data: Any) -> CheckpointPayload | None:
    """The payload record of a decoded document in the form ``save`` writes, built
    without validating again; None when the document is in any other form.

    Only what the form itself decides is looked at, and every rule of the fields it
    holds: the keys of the payload, its messages and its pending tool calls (all
    present, none other), each message's role a string of 1 to 255 characters and its
    metadata an object, each tool call an object and its ``interrupt_active`` a bool,
    the requesters strings, the runtime state an object. Validating the same document
    with pydantic takes several times longer on a payload of many messages (and gives
    an equal record)."""
    if type(data) is not dict or data.keys() != _PAYLOAD_KEYS:
        return None
    window, pending, requesters, runtime_state = (
        data["context_window"],
        data["pending_tool_calls"],
        data["interrupt_requesters"],
        data["runtime_state"],
    )
    if type(window) is not list or type(pending) is not dict or type(runtime_state) is not dict:
        return None
    if type(requesters) is not dict or any(type(v) is not str for v in requesters.values()):
        return None
    messages: list[NewMessage] = []
    for item in window:
        if type(item) is not dict or item.keys() != _MESSAGE_KEYS:
            return None
        role, metadata = item["role"], item["metadata"]
        if type(role) is not str or not 0 < len(role) <= _MAX_ROLE_LENGTH:
            return None
        if type(metadata) is not dict:
            return None
        message = {
            "role": role,
            "content": item["content"],
            "metadata": metadata,
            "created_at": None,
            "external_key": None,
        }
        messages.append(from_stored(NewMessage, message))
    calls: dict[str, PendingToolCall] = {}
    for call_id, call in pending.items():
        if type(call) is not dict or call.keys() != _PENDING_KEYS:
            return None
        tool_call, active = call["tool_call"], call["interrupt_active"]
        if type(tool_call) is not dict or type(active) is not bool:
            return None
        calls[call_id] = from_stored(
            PendingToolCall, {"tool_call": tool_call, "interrupt_active": active}
        )
    values = {**data, "context_window": messages, "pending_tool_calls": calls}
    return from_stored(CheckpointPayload, {name: values[name] for name in _PAYLOAD_FIELDS})


def _not_a_payload(ref: str, error: Exception) -> CorruptRecordError:
    return CorruptRecordError(
        f"{_TABLE} row {ref!r}: column payload is JSON but not a checkpoint payload "
        f"({error}); it was written by something other than agentledger",
        table=_TABLE,
        key=ref,
        column="payload",
    )
