"""Rows in portable form: what export, import and copy read, check, compare and write
(through ``RowRepository``).

A portable row is a dict of column name to Python value: JSON columns decoded, times
aware UTC datetimes. Every table is described once (``TableSpec``), derived from the
models, so a column added by a migration is carried without a second list to update.

Not carried: surrogate keys (``id`` of messages, steps and grants: database-local, and
meaningless elsewhere), ``capability_hash`` and ``external_key_hash`` (derived from the
capability, and from a session's scope and key), a memory item's ``words`` (derived from
its text). Rows are matched on their natural keys
instead: a session's id, (session, seq), a checkpoint's ref, (session, capability), an
app state's app_name, a user state's (app_name, user_id), a memory item's (namespace,
key), and for LangGraph's tables their primary keys. Binary columns (LangGraph's
serialized values, memory vectors) travel as base64 text in a file and as bytes in a
copy.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    ColumnElement,
    Double,
    Integer,
    LargeBinary,
    Row,
    Table,
    select,
)
from sqlalchemy.sql import Select

from .._checks import after_keyset
from .._json import Limits, check_json, decode_json, jsonb_form
from ..clock import format_time
from ..errors import InvalidIdError, ValidationError
from ..ids import validate_id
from ..models import (
    AgentAppState,
    AgentCheckpoint,
    AgentGrant,
    AgentLangGraphBlob,
    AgentLangGraphCheckpoint,
    AgentLangGraphWrite,
    AgentMemoryItem,
    AgentMessage,
    AgentSession,
    AgentStep,
    AgentUserState,
)
from ..models.types import UTCDateTime, json_text
from ..records import SESSION_STATUSES, CheckpointPayload, Record, RunSummary
from ._keywords import search_words
from .grants import capability_hash
from .memory import checked_namespace, decode_namespace, encode_namespace, padding_problem
from .sessions import external_key_hash

_INT32 = 2**31
_INT64 = 2**63
_NOT_CARRIED = {
    "agentledger_grants": {"id", "capability_hash"},
    "agentledger_sessions": {"external_key_hash"},
    "agentledger_memory_items": {"words"},
}
_ID_COLUMNS = {"id", "session_id", "run_id"}
_NON_EMPTY = {"capability", "app_name", "user_id", "external_key", "namespace", "key"}
_REF_COLUMNS = {"ref", "parent_ref", "latest_checkpoint_ref"}
_MAX_REF = 64
_TEXT_LIMITS = Limits(max_value_bytes=2**31 - 1)
_SIGNED = {"step_index", "idx"}
"""Integer columns that may hold a negative number: a harness numbers its own steps,
and LangGraph's special writes (an error, an interrupt, a resume) have negative idx."""
_RECORD_COLUMNS: dict[str, type[Record]] = {
    "session.last_run": RunSummary,
    "checkpoint.payload": CheckpointPayload,
}


@dataclass(frozen=True)
class TableSpec:
    """How one table travels: its line kind, columns, natural key and keyset order."""

    kind: str
    """The line kind in an export file: ``session``, ``message``, ``step``..."""
    plural: str
    table: Table
    columns: tuple[Column[Any], ...]
    """The carried columns, in table order."""
    key: tuple[str, ...]
    """The natural key rows are matched on."""
    order: tuple[str, ...]
    """Keyset order of a page's rows: the session, then a unique column within it."""
    objects: frozenset[str]
    """JSON columns that hold a JSON object (a dict), never another JSON value."""
    max_bytes: dict[str, str]
    """JSON columns with their own size limit: column -> ``Limits`` attribute."""

    def select(self) -> Select[Any]:
        """The carried columns (JSON as text, decoded here), plus the keyset columns."""
        names = {column.name for column in self.columns}
        extra = [self.table.c[name] for name in self.order if name not in names]
        return select(
            *(json_text(c).label(c.name) if _is_json(c) else c for c in self.columns), *extra
        )

    def ordering(self) -> list[Column[Any]]:
        """The keyset order as columns."""
        return [self.table.c[name] for name in self.order]

    def after(self, position: Sequence[Any]) -> ColumnElement[bool]:
        """Rows after ``position`` in keyset order."""
        return after_keyset(self.ordering(), position)

    def key_of(self, row: dict[str, Any]) -> tuple[Any, ...]:
        """The natural key of a portable row."""
        return tuple(row[name] for name in self.key)

    def describe(self, key: tuple[Any, ...]) -> str:
        """A natural key for people: ``session 'abc'``, ``step ('abc', 3)``."""
        shown: object = key[0] if len(key) == 1 else key
        if self.kind == "grant":
            shown = (key[0], "capability")
        return f"{self.kind} {shown!r}"


def _is_json(column: Column[Any]) -> bool:
    return isinstance(column.type, JSON)


def _spec(
    kind: str,
    model: type[Any],
    *,
    key: tuple[str, ...],
    order: tuple[str, ...],
    objects: Iterable[str] = (),
    max_bytes: dict[str, str] | None = None,
) -> TableSpec:
    table = cast(Table, model.__table__)
    skip = _NOT_CARRIED.get(table.name, {"id"} if kind in ("message", "step") else set())
    return TableSpec(
        kind=kind,
        plural=f"{kind}s",
        table=table,
        columns=tuple(column for column in table.c if column.name not in skip),
        key=key,
        order=order,
        objects=frozenset(objects),
        max_bytes=max_bytes or {},
    )


SESSIONS = _spec("session", AgentSession, key=("id",), order=("id",), objects=("state",))
MESSAGES = _spec(
    "message",
    AgentMessage,
    key=("session_id", "seq"),
    order=("session_id", "seq"),
    objects=("metadata",),
)
STEPS = _spec("step", AgentStep, key=("session_id", "seq"), order=("session_id", "seq"))
GRANTS = _spec(
    "grant",
    AgentGrant,
    key=("session_id", "capability_hash"),
    order=("session_id", "capability_hash"),
)
CHECKPOINTS = _spec(
    "checkpoint",
    AgentCheckpoint,
    key=("ref",),
    order=("session_id", "seq"),
    objects=("payload",),
    max_bytes={"payload": "max_checkpoint_bytes"},
)
APP_STATE = _spec(
    "app_state", AgentAppState, key=("app_name",), order=("app_name",), objects=("state",)
)
USER_STATE = _spec(
    "user_state",
    AgentUserState,
    key=("app_name", "user_id"),
    order=("app_name", "user_id"),
    objects=("state",),
)
_LG_PLACE = ("session_id", "checkpoint_ns")
LANGGRAPH_CHECKPOINTS = _spec(
    "langgraph_checkpoint",
    AgentLangGraphCheckpoint,
    key=(*_LG_PLACE, "checkpoint_id"),
    order=(*_LG_PLACE, "checkpoint_id"),
    objects=("channel_versions", "metadata"),
)
LANGGRAPH_BLOBS = _spec(
    "langgraph_blob",
    AgentLangGraphBlob,
    key=(*_LG_PLACE, "channel", "version"),
    order=(*_LG_PLACE, "channel", "version"),
)
LANGGRAPH_WRITES = _spec(
    "langgraph_write",
    AgentLangGraphWrite,
    key=(*_LG_PLACE, "checkpoint_id", "task_id", "idx"),
    order=(*_LG_PLACE, "checkpoint_id", "task_id", "idx"),
)
SESSION_SPECS: tuple[TableSpec, ...] = (
    SESSIONS,
    MESSAGES,
    STEPS,
    GRANTS,
    CHECKPOINTS,
    LANGGRAPH_CHECKPOINTS,
    LANGGRAPH_BLOBS,
    LANGGRAPH_WRITES,
)
"""Sessions and the tables that hang off them, parents first."""
CHILDREN: tuple[TableSpec, ...] = SESSION_SPECS[1:]
MEMORY_ITEMS = _spec(
    "memory_item",
    AgentMemoryItem,
    key=("namespace", "key"),
    order=("namespace", "key"),
    objects=("value",),
)
SCOPED: tuple[TableSpec, ...] = (APP_STATE, USER_STATE, MEMORY_ITEMS)
"""App and user state (export format 2) and memory items (format 4): rows of their
own, not of a session."""
SPECS: tuple[TableSpec, ...] = SESSION_SPECS + SCOPED
"""Every table, in the order rows are written in."""
BY_KIND: dict[str, TableSpec] = {spec.kind: spec for spec in SPECS}
_NULLABLE_OBJECTS = {"last_run", "usage_extra"}


def from_database(spec: TableSpec, row: Row[Any]) -> dict[str, Any]:
    """A portable row (the carried columns) from a row of ``spec.select()``; a stored
    JSON value that does not decode raises CorruptRecordError naming the row."""
    raw = row._mapping
    key = tuple(raw[name] for name in spec.key)
    values = {}
    for column in spec.columns:
        value = raw[column.name]
        if isinstance(value, memoryview | bytearray):
            value = bytes(value)
        elif _is_json(column):
            value = decode_json(
                value,
                table=spec.table.name,
                key=key[0] if len(key) == 1 else key,
                column=column.name,
            )
        values[column.name] = value
    return values


def to_file(spec: TableSpec, row: dict[str, Any]) -> dict[str, Any]:
    """A portable row as a JSON object for an export line (times as ISO 8601 text)."""
    result: dict[str, Any] = {}
    for column in spec.columns:
        value = row[column.name]
        if isinstance(value, datetime):
            value = format_time(value)
        elif isinstance(value, bytes):
            value = base64.b64encode(value).decode("ascii")
        result[column.name] = value
    return result


def parse_time(value: object, *, where: str) -> datetime:
    """An ISO 8601 time with an offset (``Z`` or ``+hh:mm``) as an aware UTC datetime."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise ValidationError(f"{where}: {value!r} is not an ISO 8601 time") from None
    else:
        raise ValidationError(f"{where}: expected an ISO 8601 time, got {type(value).__name__}")
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise ValidationError(f"{where}: {value!r} has no UTC offset (add Z or +00:00)")
    return parsed.astimezone(UTC)


def checked(
    spec: TableSpec, values: dict[str, Any], *, where: str, limits: Limits
) -> dict[str, Any]:
    """A portable row checked column by column against the model, before any write:
    exactly the carried columns, each of its column's type and size, ids by the id
    rules, JSON by the library's JSON rules. ``where`` names the row in errors."""
    checks = _checks(spec)
    if type(values) is not dict or values.keys() != checks.keys():
        _raise_columns(spec, values, list(checks), where)
    row = {name: check(values[name], where, limits) for name, check in checks.items()}
    if spec is GRANTS:
        row["capability_hash"] = capability_hash(row["capability"])
    if spec is MEMORY_ITEMS:
        _check_memory_item(row, where)
        row["words"] = search_words(row["text"])
    if spec is SESSIONS:
        key = row["external_key"]
        row["external_key_hash"] = (
            None if key is None else external_key_hash(row["app_name"], row["user_id"], key)
        )
    return row


def _check_memory_item(row: dict[str, Any], where: str) -> None:
    """What the columns of a memory item mean together: a namespace of non-empty labels
    and a key every database tells apart, and as many vectors of one length as embedded
    paths."""
    try:
        labels = checked_namespace(decode_namespace(row["namespace"]))
    except ValidationError as error:
        raise ValidationError(f"{where}: memory_item.namespace: {error}") from None
    if encode_namespace(labels) != row["namespace"]:
        raise ValidationError(
            f"{where}: memory_item.namespace {row['namespace']!r} is not in its stored form "
            f"({encode_namespace(labels)!r}: labels joined by '.', each '%', '.', control "
            "character and trailing space escaped)"
        )
    problem = padding_problem(row["key"])
    if problem is not None:
        raise ValidationError(f"{where}: memory_item.key {problem}")
    paths, vectors = row["embedding_paths"], row["embeddings"]
    if paths is None and vectors is None:
        return
    if (
        type(paths) is not list
        or not paths
        or not all(type(path) is str for path in paths)
        or vectors is None
        or len(vectors) % (4 * len(paths))
    ):
        raise ValidationError(
            f"{where}: memory_item.embedding_paths must list one path per vector of "
            "memory_item.embeddings (float32, all of one length), or both be null"
        )


def _raise_columns(spec: TableSpec, values: object, names: list[str], where: str) -> None:
    if type(values) is not dict:
        raise ValidationError(f"{where}: a {spec.kind} must be a JSON object")
    unknown = sorted(set(values) - set(names))
    missing = sorted(set(names) - set(values))
    parts = []
    if unknown:
        parts.append(f"unknown column(s) {', '.join(unknown)}")
    if missing:
        parts.append(f"missing column(s) {', '.join(missing)}")
    raise ValidationError(f"{where}: {spec.kind} has {' and '.join(parts)}")


_Check = Callable[[Any, str, Limits], Any]
_CHECKS: dict[str, dict[str, _Check]] = {}


def _checks(spec: TableSpec) -> dict[str, _Check]:
    """One checker per carried column, built once per table from the model."""
    found = _CHECKS.get(spec.kind)
    if found is None:
        found = {column.name: _check_for(spec, column) for column in spec.columns}
        _CHECKS[spec.kind] = found
    return found


def _check_for(spec: TableSpec, column: Column[Any]) -> _Check:
    name, nullable = column.name, bool(column.nullable)
    label = f"{spec.kind}.{name}"
    if _is_json(column):
        json_check: _Check = _JSONCheck(
            label,
            name in spec.objects,
            name in _NULLABLE_OBJECTS,
            spec.max_bytes.get(name),
            jsonb=name in ("state", "value"),
        )
        record = _RECORD_COLUMNS.get(label)
        return json_check if record is None else _record_check(label, json_check, record)
    if isinstance(column.type, UTCDateTime):
        inner: _Check = _time_check(label)
    elif isinstance(column.type, LargeBinary):
        inner = _bytes_check(label)
    elif isinstance(column.type, Double):
        inner = _minutes_check(label)
    elif isinstance(column.type, Integer):
        bound = _INT64 if isinstance(column.type, BigInteger) else _INT32
        inner = _int_check(label, bound, low=-bound if name in _SIGNED else 0)
    elif label == "session.status":
        inner = _status_check
    else:
        inner = _TextCheck(label, name, getattr(column.type, "length", None))

    def check(value: Any, where: str, limits: Limits) -> Any:
        if value is None:
            if nullable:
                return None
            raise ValidationError(f"{where}: {label} cannot be null")
        return inner(value, where, limits)

    return check


def _time_check(label: str) -> _Check:
    def check(value: Any, where: str, _limits: Limits) -> datetime:
        if type(value) is datetime and value.tzinfo is UTC:
            return value
        return parse_time(value, where=f"{where}: {label}")

    return check


def _bytes_check(label: str) -> _Check:
    def check(value: Any, where: str, _limits: Limits) -> bytes:
        if type(value) is bytes:
            return value
        if type(value) is str:
            try:
                return base64.b64decode(value.encode("ascii"), validate=True)
            except (binascii.Error, UnicodeEncodeError):
                pass
        raise ValidationError(f"{where}: {label} must be base64 text, got {type(value).__name__}")

    return check


def _int_check(label: str, bound: int, *, low: int) -> _Check:
    def check(value: Any, where: str, _limits: Limits) -> int:
        if type(value) is not int or not low <= value < bound:
            raise ValidationError(
                f"{where}: {label} must be an integer that fits the column "
                f"({low:,} to {bound - 1:,}), got {value!r}"
            )
        return value

    return check


def _minutes_check(label: str) -> _Check:
    def check(value: Any, where: str, _limits: Limits) -> float:
        if type(value) in (int, float) and math.isfinite(value) and value > 0:
            return float(value)
        raise ValidationError(f"{where}: {label} must be a number above 0, got {value!r}")

    return check


def _status_check(value: Any, where: str, _limits: Limits) -> str:
    if value not in SESSION_STATUSES:
        raise ValidationError(
            f"{where}: session.status must be one of {', '.join(SESSION_STATUSES)}, got {value!r}"
        )
    return cast(str, value)


def _record_check(label: str, json_check: _Check, record: type[Record]) -> _Check:
    """A JSON column holding a record (a run summary, a checkpoint payload): valid JSON
    that is also a valid ``record``, or reading the row back would fail later."""

    def check(value: Any, where: str, limits: Limits) -> Any:
        value = json_check(value, where, limits)
        if value is not None:
            try:
                record.model_validate(value)
            except ValidationError as error:
                raise ValidationError(
                    f"{where}: {label} is not a {record.__name__}: {error}"
                ) from None
        return value

    return check


@dataclass(frozen=True)
class _TextCheck:
    label: str
    name: str
    length: int | None

    def __call__(self, value: Any, where: str, _limits: Limits) -> str:
        at = f"{where}: {self.label}"
        if type(value) is not str:
            raise ValidationError(f"{at} must be a string, got {type(value).__name__}")
        if self.name in _ID_COLUMNS or self.name in _REF_COLUMNS:
            try:
                validate_id(value, what="id")
            except InvalidIdError as error:
                raise ValidationError(f"{at}: {error}") from None
            if self.name in _REF_COLUMNS and len(value) > _MAX_REF:
                raise ValidationError(f"{at} is longer than {_MAX_REF} characters")
        if self.length is not None and len(value) > self.length:
            raise ValidationError(
                f"{at} is {len(value)} characters, over the limit of {self.length}"
            )
        if not value and self.name in _NON_EMPTY:
            raise ValidationError(f"{at} cannot be empty")
        if "\x00" in value or not value.isascii():
            check_json(value, path=at, limits=_TEXT_LIMITS)  # NUL characters, lone surrogates
        return value


@dataclass(frozen=True)
class _JSONCheck:
    label: str
    object: bool
    nullable_object: bool
    limit: str | None
    jsonb: bool = False
    """Session, app or user state: the float rule of JSONB, and stored in its form
    (``jsonb_form``), as the API stores it."""

    def __call__(self, value: Any, where: str, limits: Limits) -> Any:
        kind = type(value)
        if self.object and kind is not dict:
            raise ValidationError(
                f"{where}: {self.label} must be a JSON object, got {kind.__name__}"
            )
        if self.nullable_object and value is not None and kind is not dict:
            raise ValidationError(f"{where}: {self.label} must be a JSON object or null")
        if value is None or kind is bool or (kind is int and -_INT64 <= value < _INT64):
            return value
        max_bytes = getattr(limits, self.limit) if self.limit else None
        check_json(
            value,
            path=f"{where}: {self.label}",
            limits=limits,
            max_bytes=max_bytes,
            jsonb=self.jsonb,
        )
        return jsonb_form(value) if self.jsonb else value


def differing(spec: TableSpec, incoming: dict[str, Any], stored: dict[str, Any]) -> list[str]:
    """The carried columns whose values differ (JSON compared as JSON values)."""
    names = []
    for column in spec.columns:
        a, b = incoming[column.name], stored[column.name]
        same = same_json(a, b) if _is_json(column) else a == b
        if not same:
            names.append(column.name)
    return names


def same_json(a: Any, b: Any) -> bool:
    """Whether two decoded JSON values are the same JSON value.

    Numbers compare by value, whatever their spelling: PostgreSQL's JSONB (session
    state) stores numbers as ``numeric``, which turns ``-0.0`` into ``0.0`` and
    ``1e20`` into ``100000000000000000000``. Booleans are never numbers.
    """
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
