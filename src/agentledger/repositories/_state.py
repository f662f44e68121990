"""Key/value state shared by the session, app and user scopes: deltas, and the scoped
state rows (``agentledger_app_state``, ``agentledger_user_state``) read, replaced and
merged.

A delta merge never conflicts with another: it takes the scope row's lock (creating
the row first when it is absent, in one statement concurrent creators cannot race),
applies the delta to what is stored and bumps the revision. A write that merges into
several scopes at once (a message append's app and user deltas) reads their rows in
one unlocked statement and stores each merge with one UPDATE versioned by the revision
it read (``merge_from``), falling back to the locked merge for a row that is absent or
has moved since. A replace (``save``) is optimistic like a session save: it succeeds
only at the revision its record was read at.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    CompoundSelect,
    Select,
    Table,
    Update,
    and_,
    bindparam,
    delete,
    insert,
    literal_column,
    select,
    union_all,
    update,
)
from sqlalchemy.orm import Session

from .._checks import bounded_int, checked_text, text_problem
from .._dialects import locking
from .._json import Limits, check_object, decode_json
from .._limits import MAX_SCOPE_LENGTH
from .._translate import duplicate_as
from ..errors import ConflictError, CorruptRecordError, ValidationError
from ..models import AgentAppState, AgentUserState
from ..models.types import json_text
from ..records import AppState, StateDelta, UserState, from_stored
from ._statements import insert_if_absent, missing_row_lock_is_safe

ScopedState = AppState | UserState


def as_delta(value: object, *, path: str, limits: Limits) -> StateDelta:
    """``value`` (a StateDelta, or a dict of one) checked: JSON values to set (by the
    rules of session state), text keys to delete, no key both set and deleted."""
    if isinstance(value, dict):
        try:
            value = StateDelta.model_validate(value)
        except ValueError as error:
            raise ValidationError(
                f"{path} must be a StateDelta or a dict {{'set': {{...}}, 'delete': [...]}}: "
                f"{error}",
                path=path,
            ) from None
    if not isinstance(value, StateDelta):
        raise ValidationError(
            f"{path} must be a StateDelta (or a dict of one), got {type(value).__name__}",
            path=path,
        )
    check_object(value.set, path=f"{path}.set", limits=limits, jsonb=True)
    for index, key in enumerate(value.delete):
        problem = text_problem(key)
        if problem is not None:
            raise ValidationError(f"{path}.delete[{index}] {problem}", path=f"{path}.delete")
    both = set(value.set) & set(value.delete)
    if both:
        raise ValidationError(
            f"{path}: keys both set and deleted: {sorted(both)}", path=f"{path}.delete"
        )
    return value


def applied(
    state: dict[str, Any], delta: StateDelta, *, path: str, limits: Limits
) -> dict[str, Any]:
    """``state`` with ``delta`` applied (top-level keys), checked within the limits."""
    result = {key: value for key, value in state.items() if key not in delta.delete}
    result.update(delta.set)
    return check_object(result, path=path, limits=limits, jsonb=True)


def is_empty(delta: StateDelta) -> bool:
    """Whether ``delta`` changes nothing."""
    return not delta.set and not delta.delete


_UPDATES: dict[str, Update] = {}


@dataclass(frozen=True)
class ScopeKind:
    """One scoped-state table: its key columns, record type and prebuilt statements."""

    name: str
    """How errors name it: ``app state``, ``user state``."""
    table: Table
    keys: tuple[str, ...]
    record: type[AppState] | type[UserState]

    def key_of(self, values: tuple[object, ...]) -> tuple[str, ...]:
        """The key values checked: each 1 to 255 characters of text (no NUL, no lone
        surrogate), a ValidationError naming the column otherwise."""
        return tuple(
            checked_text(value, name, max_length=MAX_SCOPE_LENGTH)
            for name, value in zip(self.keys, values, strict=True)
        )

    @property
    def _where(self) -> Any:
        return and_(*(self.table.c[name] == bindparam(name) for name in self.keys))

    def load(self, *, lock: bool) -> Select[Any]:
        """The read of one scope's row (FOR UPDATE with ``lock``), JSON as text."""
        query = select(
            *(self.table.c[name] for name in self.keys),
            json_text(self.table.c.state).label("state"),
            self.table.c.revision,
            self.table.c.created_at,
            self.table.c.updated_at,
        ).where(self._where)
        return locking(query) if lock else query

    def params(self, key: tuple[str, ...]) -> dict[str, Any]:
        """The bind parameters naming one scope's row."""
        return dict(zip(self.keys, key, strict=True))

    @property
    def versioned_update(self) -> Update:
        """``UPDATE <table> SET state, revision, updated_at WHERE <key> AND revision =
        :b_revision``, built once (bind parameters ``k_<key column>``, ``new_state``,
        ``new_revision``, ``now``)."""
        built = _UPDATES.get(self.name)
        if built is None:
            table = self.table
            statement = (
                update(table)
                .where(*(table.c[name] == bindparam(f"k_{name}") for name in self.keys))
                .where(table.c.revision == bindparam("b_revision"))
                .values(
                    state=bindparam("new_state", type_=table.c.state.type),
                    revision=bindparam("new_revision"),
                    updated_at=bindparam("now", type_=table.c.updated_at.type),
                )
            )
            built = _UPDATES.setdefault(self.name, statement)
        return built

    def tagged(self, index: int, *extra: ColumnElement[Any]) -> Select[Any]:
        """The unlocked read of one scope's row as the ``index``-th part of a combined
        read (``read_many``): a ``part`` column saying which part a row answers, the
        row's state, revision and times, then ``extra`` columns (what the other parts
        of a UNION need); bind parameters suffixed ``_<index>`` (``scope_params``)."""
        return select(
            literal_column(str(index)).label("part"),
            self.table.c.revision,
            json_text(self.table.c.state).label("state"),
            self.table.c.created_at,
            self.table.c.updated_at,
            *extra,
        ).where(*(self.table.c[name] == bindparam(f"{name}_{index}") for name in self.keys))


Scopes = list[tuple["ScopeKind", tuple[str, ...]]]
"""Scopes to read together: each one's kind and key."""


APP = ScopeKind("app state", cast(Table, AgentAppState.__table__), ("app_name",), AppState)
USER = ScopeKind(
    "user state", cast(Table, AgentUserState.__table__), ("app_name", "user_id"), UserState
)


def read(session: Session, kind: ScopeKind, key: tuple[str, ...], *, lock: bool = False) -> Any:
    """The stored state of ``key``, or empty state at revision 0 when none is stored."""
    row = session.connection().execute(kind.load(lock=lock), kind.params(key)).first()
    return _record(kind, key, row)


_READS: dict[tuple[str, ...], Select[Any] | CompoundSelect[Any]] = {}


def read_many(session: Session, scopes: Scopes) -> list[Any]:
    """The stored state of each scope, as ``read`` (unlocked) returns it, in one SELECT
    (a UNION ALL of the scopes' rows): what a write that merges into several scopes
    reads first to compute the merged states (``merge_from``)."""
    names = tuple(kind.name for kind, _ in scopes)
    statement = _READS.get(names)
    if statement is None:
        parts = [kind.tagged(index) for index, (kind, _) in enumerate(scopes)]
        built = parts[0] if len(parts) == 1 else union_all(*parts)
        statement = _READS.setdefault(names, built)
    rows = session.connection().execute(statement, scope_params(scopes)).all()
    return scope_records(scopes, rows)


def scope_params(scopes: Scopes) -> dict[str, Any]:
    """The bind parameters of the ``tagged`` reads of ``scopes``."""
    return {
        f"{name}_{index}": value
        for index, (kind, key) in enumerate(scopes)
        for name, value in kind.params(key).items()
    }


def scope_records(scopes: Scopes, rows: Sequence[Any]) -> list[Any]:
    """The record of each scope from the rows of its ``tagged`` read (rows of other
    parts, ``part`` below 0, are left out); empty at revision 0 when none is stored."""
    found = {row.part: row for row in rows if row.part >= 0}
    return [_record(kind, key, found.get(index)) for index, (kind, key) in enumerate(scopes)]


def _record(kind: ScopeKind, key: tuple[str, ...], row: Any) -> Any:
    """The record of ``key`` from its row (None: nothing stored, empty at revision 0)."""
    values: dict[str, Any] = kind.params(key)
    if row is None:
        values.update(state={}, revision=0, created_at=None, updated_at=None)
        return from_stored(kind.record, values)
    state = decode_json(row.state, table=kind.table.name, key=key, column="state")
    if type(state) is not dict:
        raise CorruptRecordError(
            f"{kind.table.name} row {key!r}: column state is JSON but not an object; it was "
            "written by something other than agentledger",
            table=kind.table.name,
            key=key,
            column="state",
        )
    values.update(
        state=state, revision=row.revision, created_at=row.created_at, updated_at=row.updated_at
    )
    return from_stored(kind.record, values)


def save(session: Session, kind: ScopeKind, record: Any, now: datetime, limits: Limits) -> Any:
    """Replace the state of ``record``'s scope with its state, if the stored revision is
    still the record's (0: nothing stored yet); returns it at the new revision."""
    if not isinstance(record, kind.record):
        raise ValidationError(
            f"save() takes a {kind.record.__name__}, got {type(record).__name__}", path="record"
        )
    key = kind.key_of(tuple(getattr(record, name) for name in kind.keys))
    bounded_int(record.revision, "record.revision")
    state = check_object(record.state, path="state", limits=limits, jsonb=True)
    stale = _stale(kind, key, record.revision)
    if record.revision == 0:
        values = {**kind.params(key), "state": state, "revision": 1}
        with duplicate_as(lambda: stale):
            session.execute(insert(kind.table).values(created_at=now, updated_at=now, **values))
        return read(session, kind, key)
    _update(session, kind, key, state, record.revision, now, stale)
    return read(session, kind, key)


def merge(
    session: Session,
    kind: ScopeKind,
    key: tuple[str, ...],
    delta: StateDelta,
    now: datetime,
    limits: Limits,
    *,
    path: str = "state",
) -> Any:
    """Apply ``delta`` to the stored state of ``key`` under its row lock (the row is
    created first when absent) and bump the revision; an empty delta changes nothing."""
    if is_empty(delta):
        return read(session, kind, key)
    # A row that exists is locked by the read (one statement less); one that is absent
    # is created first, in the statement concurrent creators cannot race.
    current = read(session, kind, key, lock=True) if missing_row_lock_is_safe(session) else None
    if current is None or current.created_at is None:
        values = {**kind.params(key), "state": {}, "revision": 0}
        values.update(created_at=now, updated_at=now)
        insert_if_absent(session, kind.table, values, kind.keys)
        current = read(session, kind, key, lock=True)
    state = applied(current.state, delta, path=path, limits=limits)
    # Under the row lock the revision cannot move; checked all the same (a versioned table).
    _update(session, kind, key, state, current.revision, now, _stale(kind, key, current.revision))
    return from_stored(
        kind.record,
        {
            **kind.params(key),
            "state": state,
            "revision": current.revision + 1,
            "created_at": current.created_at,
            "updated_at": now,
        },
    )


def merge_from(
    session: Session,
    kind: ScopeKind,
    key: tuple[str, ...],
    read: Any,
    state: dict[str, Any],
    delta: StateDelta,
    now: datetime,
    limits: Limits,
    *,
    path: str = "state",
) -> None:
    """Store ``state``, the merge of ``delta`` into ``read`` (the scope's record as an
    unlocked read found it, ``read_many``), with one versioned UPDATE: the row lock
    that UPDATE takes and its revision check stand for the locking read of ``merge``.
    When the row is not stored yet, or another writer moved it since the read, this
    is ``merge`` (under the row lock, the row created first when absent), so no delta
    is ever lost and concurrent merges never conflict."""
    if read.created_at is not None:
        params = {f"k_{name}": value for name, value in kind.params(key).items()}
        params.update(
            b_revision=read.revision, new_state=state, new_revision=read.revision + 1, now=now
        )
        if session.connection().execute(kind.versioned_update, params).rowcount == 1:
            return
    merge(session, kind, key, delta, now, limits, path=path)


def remove(session: Session, kind: ScopeKind, key: tuple[str, ...]) -> bool:
    """Delete the stored state of ``key``; whether there was any."""
    statement = delete(kind.table).where(
        *(kind.table.c[name] == value for name, value in kind.params(key).items())
    )
    return bool(session.execute(statement).rowcount)  # type: ignore[attr-defined]


def _update(
    session: Session,
    kind: ScopeKind,
    key: tuple[str, ...],
    state: dict[str, Any],
    revision: int,
    now: datetime,
    stale: ConflictError,
) -> None:
    table = kind.table
    statement = (
        update(table)
        .where(*(table.c[name] == value for name, value in kind.params(key).items()))
        .where(table.c.revision == revision)
        .values(state=state, revision=table.c.revision + 1, updated_at=now)
    )
    if session.execute(statement).rowcount != 1:  # type: ignore[attr-defined]
        raise stale


def _stale(kind: ScopeKind, key: tuple[str, ...], revision: int) -> ConflictError:
    shown = key[0] if len(key) == 1 else key
    return ConflictError(
        f"the {kind.name} of {shown!r} changed since revision {revision}; read it again and "
        "re-apply the change (merge a delta instead to never conflict)",
        reason="stale",
        expected=revision,
    )
