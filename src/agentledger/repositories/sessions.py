"""Sessions: create, read, save with optimistic concurrency, finalize, delete, list."""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal, cast

from sqlalchemy import (
    Column,
    FetchedValue,
    Integer,
    MetaData,
    Row,
    Select,
    Table,
    Text,
    bindparam,
    delete,
    exists,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, make_transient_to_detached, registry
from sqlalchemy.orm.exc import StaleDataError
from sqlalchemy.types import TypeDecorator

from .._concurrency import spawn
from .._dialects import returns_from_update
from .._json import check_json, check_object, decode_json
from .._translate import is_unique_violation
from ..errors import (
    ConflictError,
    CorruptRecordError,
    InvalidIdError,
    NotFoundError,
    ValidationError,
)
from ..ids import validate_id
from ..models import AgentSession
from ..models.types import json_text
from ..records import Page, RunSummary, SessionRecord, SessionSummary, from_stored
from ._base import Repository, operation

_SESSIONS = cast(Table, AgentSession.__table__)
_JSON_COLUMNS = ("state", "last_run")
_RECORD_COLUMNS = tuple(
    json_text(column).label(column.name) if column.name in _JSON_COLUMNS else column
    for column in _SESSIONS.c
)
_SUMMARY_COLUMNS = (
    _SESSIONS.c.id,
    _SESSIONS.c.title,
    _SESSIONS.c.preview,
    _SESSIONS.c.app_name,
    _SESSIONS.c.user_id,
    _SESSIONS.c.model,
    _SESSIONS.c.status,
    _SESSIONS.c.message_count,
    _SESSIONS.c.step_count,
    _SESSIONS.c.input_tokens,
    _SESSIONS.c.output_tokens,
    _SESSIONS.c.total_tokens,
    _SESSIONS.c.created_at,
    _SESSIONS.c.updated_at,
)
MAX_PAGE_SIZE = 1000
_BY_ID = _SESSIONS.c.id == bindparam("id")
# Built once: building and cache-keying a statement per call cost more than running it.
_LOAD = select(*_RECORD_COLUMNS).where(_BY_ID)
_LOAD_LOCKED = {
    "share": _LOAD.with_for_update(read=True),
    "update": _LOAD.with_for_update(),
}
_EXISTS = select(exists().where(_BY_ID))
_EXISTS_LOCKED = {
    lock: select(_SESSIONS.c.id).where(_BY_ID).with_for_update(read=lock == "share")
    for lock in ("share", "update")
}
_TABLE = "agentledger_sessions"


def _text(value: object, *, field: str, max_length: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{field} must be a string, got {type(value).__name__}", path=field)
    if len(value) > max_length:
        raise ValidationError(
            f"{field} is {len(value)} characters, over the limit of {max_length}", path=field
        )
    if "\x00" in value:
        raise ValidationError(f"{field} contains a NUL character", path=field)
    return value


def _scope(value: object, *, field: str) -> str | None:
    if value is None:
        return None
    return validate_id(value, what=field)


def record_of(row: Row[Any]) -> SessionRecord:
    """A SessionRecord from a row of ``_RECORD_COLUMNS`` (JSON columns as text), built
    without validating again what was validated on write; the last run (a nested
    record whose time is stored as text) is validated."""
    return _record_from(dict(row._mapping))


def _decoded(value: Any, id: str, column: str) -> Any:
    if isinstance(value, str):
        return decode_json(value, table=_TABLE, key=id, column=column)
    return value  # decoded by a PostgreSQL driver (RETURNING of a json column)


def _record_from(values: dict[str, Any]) -> SessionRecord:
    """A SessionRecord from every column of a session row, in table order."""
    id = values["id"]
    state = _decoded(values["state"], id, "state")
    if type(state) is not dict:
        raise _corrupt(id, "state", "is JSON but not an object")
    values["state"] = state
    last_run = _decoded(values["last_run"], id, "last_run")
    if last_run is not None:
        try:
            last_run = RunSummary.model_validate(last_run)
        except ValueError as error:
            raise _corrupt(id, "last_run", f"is JSON but not a run summary ({error})") from None
    values["last_run"] = last_run
    return from_stored(SessionRecord, values)


def _corrupt(id: str, column: str, problem: str) -> CorruptRecordError:
    return CorruptRecordError(
        f"{_TABLE} row {id!r}: column {column} {problem}; it was written by something "
        "other than agentledger",
        table=_TABLE,
        key=id,
        column=column,
    )


def summary_of(row: Sequence[Any]) -> SessionSummary:
    """A SessionSummary from a row of ``_SUMMARY_COLUMNS``; title falls back to the preview."""
    (id, title, preview, app_name, user_id, model, status, *counts, created_at, updated_at) = row
    values = {
        "id": id,
        "title": title or preview,
        "app_name": app_name,
        "user_id": user_id,
        "model": model,
        "status": status,
        **dict(zip(_COUNTS, counts, strict=True)),
        "created_at": created_at,
        "updated_at": updated_at,
    }
    return from_stored(SessionSummary, values)


_COUNTS = ("message_count", "step_count", "input_tokens", "output_tokens", "total_tokens")


def load_record(
    session: Session, id: str, *, lock: Literal["share", "update"] | None = None
) -> SessionRecord:
    """The session ``id`` as a record; NotFoundError when it is not there.

    With ``lock``, a locking read (FOR SHARE / FOR UPDATE; SQLite's write transactions
    hold the database lock already): it sees the latest committed row even under
    MariaDB's REPEATABLE READ, where a plain SELECT would reuse the first snapshot.
    """
    query = _LOAD if lock is None else _LOAD_LOCKED[lock]
    row = session.connection().execute(query, {"id": id}).first()
    if row is None:
        raise NotFoundError(f"no session {id!r}", id=id)
    return record_of(row)


def session_exists(
    session: Session, id: str, *, lock: Literal["share", "update"] | None = None
) -> bool:
    """Whether session ``id`` exists; with ``lock``, its row stays locked until commit."""
    if lock is None:
        return bool(session.connection().execute(_EXISTS, {"id": id}).scalar())
    return session.connection().execute(_EXISTS_LOCKED[lock], {"id": id}).first() is not None


class _JSONText(TypeDecorator[Any]):
    """JSON written as the engine's JSON type writes it (``json.dumps``), read back as
    its text, so ``record_of`` decodes it and can name a corrupt row."""

    impl = Text()
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else json.dumps(value)


def _returning_table() -> Table:
    """``agentledger_sessions`` again, for versioned writes that read the row back in
    their own UPDATE (``RETURNING``) instead of a SELECT after it.

    Every column but the key and the version is marked as set by the server on UPDATE
    (``FetchedValue``), so with ``eager_defaults`` the ORM returns each column the
    write did not set; the JSON columns come back as text (PostgreSQL's drivers decode
    json themselves). A private MetaData: this copy is never created, migrated or
    compared; the public ``AgentSession`` mapping is unchanged.
    """
    columns = []
    for column in _SESSIONS.c:
        kind: Any = column.type
        if column.name == "state":
            kind = _JSONText().with_variant(postgresql.JSONB(), "postgresql")
        elif column.name == "last_run":
            kind = _JSONText().with_variant(postgresql.JSON(none_as_null=True), "postgresql")
        fetched = None if column.name in ("id", "revision") else FetchedValue()
        columns.append(
            Column(column.name, kind, key=column.key, primary_key=column.primary_key,
                   server_onupdate=fetched)
        )  # fmt: skip
    return Table(_TABLE, MetaData(), *columns)


class _ReturningSession:
    """A session row whose versioned UPDATE returns the columns it did not write."""

    id: str
    revision: int


_RETURNING = _returning_table()
registry().map_imperatively(
    _ReturningSession, _RETURNING, version_id_col=_RETURNING.c.revision, eager_defaults=True
)


def versioned_row(session: Session, record: SessionRecord) -> Any:
    """A session row the ORM treats as loaded at the record's revision, without a SELECT:
    the next flush is ``UPDATE ... WHERE id = :id AND revision = :revision``. Where the
    database can (``returns_from_update``), that UPDATE also returns every column it
    does not set, for ``written_record``."""
    for mapped in (AgentSession, _ReturningSession):
        loaded = session.identity_map.get(session.identity_key(mapped, record.id))
        if loaded is not None:
            session.expunge(loaded)
    cls = _ReturningSession if returns_from_update(session) else AgentSession
    row = cls()
    row.id, row.revision = record.id, record.revision
    make_transient_to_detached(row)
    session.add(row)
    return row


def written_record(session: Session, row: Any) -> SessionRecord:
    """The session as a versioned write (``versioned_row`` + ``flush_versioned``) left
    it: from what its UPDATE returned, else read back with a SELECT.

    Exact either way: the UPDATE holds the row's lock until commit, and every column
    comes from the database as of that UPDATE, including the counters, totals, status
    and checkpoint pointer that step appends, finalize and checkpoints move without a
    revision bump.
    """
    if not isinstance(row, _ReturningSession):
        return load_record(session, row.id)
    values = {column.key: getattr(row, column.key) for column in _RETURNING.c}
    return _record_from(values)


def flush_versioned(session: Session, record: SessionRecord) -> None:
    """Flush a ``versioned_row`` change; a stale revision becomes ConflictError
    (``stale``, or ``deleted`` when the session is gone)."""
    try:
        session.flush()
    except StaleDataError as error:
        session.rollback()
        if session_exists(session, record.id):
            raise ConflictError(
                f"session {record.id!r} changed since revision {record.revision}; "
                "read it again and re-apply the change",
                reason="stale",
                id=record.id,
                expected=record.revision,
            ) from error
        raise ConflictError(
            f"session {record.id!r} was deleted by another writer",
            reason="deleted",
            id=record.id,
        ) from error


class SessionRepository(Repository):
    """The single implementation of the session operations."""

    @operation(writes=True)
    def create(
        self,
        id: str | None = None,
        *,
        app_name: str | None = None,
        user_id: str | None = None,
        title: str | None = None,
        model: str | None = None,
        state: dict[str, Any] | None = None,
    ) -> SessionRecord:
        """Create a session; an id is generated (sortable by creation time) when none is given.

        Raises:
            ConflictError: reason ``exists`` when the id is taken.
            InvalidIdError, ValidationError: bad id, scope, title, model or state.
        """
        now = self._work.settings.now()
        row = self._new_row(
            id, now, app_name=app_name, user_id=user_id, title=title, model=model, state=state
        )
        self._session.add(row)
        try:
            self._session.flush()
        except IntegrityError as error:
            if is_unique_violation(error):
                raise ConflictError(
                    f"session {row.id!r} already exists", reason="exists", id=row.id
                ) from error
            raise
        return load_record(self._session, row.id)

    def _new_row(
        self,
        id: str | None,
        now: datetime,
        *,
        app_name: str | None = None,
        user_id: str | None = None,
        title: str | None = None,
        model: str | None = None,
        state: dict[str, Any] | None = None,
    ) -> AgentSession:
        from ..ids import new_id

        limits = self._work.settings.limits
        return AgentSession(
            id=validate_id(id) if id is not None else new_id(now),
            app_name=_scope(app_name, field="app_name"),
            user_id=_scope(user_id, field="user_id"),
            title=_text(title, field="title", max_length=512),
            model=_text(model, field="model", max_length=255),
            status="active",
            state=check_object(
                {} if state is None else state, path="state", limits=limits, jsonb=True
            ),
            message_count=0,
            message_seq=0,
            step_count=0,
            checkpoint_seq=0,
            input_tokens=0,
            output_tokens=0,
            total_tokens=0,
            created_at=now,
            updated_at=now,
        )

    @operation(writes=False)
    def get(self, id: str) -> SessionRecord:
        """The session ``id``.

        Raises:
            NotFoundError: no such session.
        """
        return load_record(self._session, validate_id(id))

    @operation(writes=False)
    def get_or_none(self, id: str) -> SessionRecord | None:
        """The session ``id``, or None when there is none."""
        try:
            return load_record(self._session, validate_id(id))
        except NotFoundError:
            return None

    @operation(writes=False)
    def exists(self, id: str) -> bool:
        """Whether session ``id`` exists."""
        return session_exists(self._session, validate_id(id))

    @operation(writes=True)
    def get_or_create(self, /, id: str, **fields: Any) -> tuple[SessionRecord, bool]:
        """The session ``id`` and False, or a new one made with ``fields`` and True.

        Two concurrent callers for one id get one session: one creates it, the other
        gets the stored one.
        """
        validate_id(id)
        unknown = set(fields) - {"app_name", "user_id", "title", "model", "state"}
        if unknown:
            raise ValidationError(f"unknown session fields: {sorted(unknown)}", path="fields")
        try:
            return load_record(self._session, id), False
        except NotFoundError:
            pass
        now = self._work.settings.now()
        row = self._new_row(id, now, **fields)
        savepoint = self._session.begin_nested()
        try:
            self._session.add(row)
            self._session.flush()
        except IntegrityError as error:
            savepoint.rollback()
            if not is_unique_violation(error):
                raise
            return load_record(self._session, id, lock="share"), False
        savepoint.commit()
        return load_record(self._session, id), True

    @operation(writes=True)
    def save(self, record: SessionRecord) -> SessionRecord:
        """Write the record's title, model and state, if its revision is still the stored one.

        Returns the record at its new revision (one more).

        Raises:
            ConflictError: reason ``stale`` when another writer saved first, ``deleted``
                when another writer deleted the session.
            ValidationError: a title, model or state that cannot be stored.
        """
        if not isinstance(record, SessionRecord):
            raise ValidationError(
                f"save() takes a SessionRecord, got {type(record).__name__}", path="record"
            )
        limits = self._work.settings.limits
        title = _text(record.title, field="title", max_length=512)
        model = _text(record.model, field="model", max_length=255)
        state = check_object(record.state, path="state", limits=limits, jsonb=True)
        row = versioned_row(self._session, record)
        row.title, row.model, row.state = title, model, state
        row.updated_at = self._work.settings.now()
        flush_versioned(self._session, record)
        return written_record(self._session, row)

    @operation(writes=True)
    def finalize(self, id: str, summary: RunSummary) -> SessionRecord:
        """Record how a run ended: the session's status and its last run, overwriting the
        previous run's. Writes only columns ``save`` never writes, so neither undoes the
        other, and leaves the revision alone.

        Raises:
            NotFoundError: no such session (a late writer never resurrects a deleted one).
            ValidationError: a summary that is not a RunSummary (or a dict of one).
        """
        validate_id(id)
        try:
            summary = RunSummary.model_validate(summary)
        except ValueError as error:
            raise ValidationError(f"summary: {error}", path="summary") from None
        now = self._work.settings.now()
        if summary.ended_at is None:
            summary = summary.model_copy(update={"ended_at": now})
        check_json(summary.error, path="summary.error", limits=self._work.settings.limits)
        statement = (
            update(_SESSIONS)
            .where(_SESSIONS.c.id == id)
            .values(status=summary.status, last_run=summary.model_dump(mode="json"), updated_at=now)
        )
        if self._session.execute(statement).rowcount == 0:  # type: ignore[attr-defined]
            raise NotFoundError(f"no session {id!r}: the run summary is not stored", id=id)
        return load_record(self._session, id)

    @operation(writes=True)
    def delete(self, id: str) -> None:
        """Delete session ``id`` with its messages, steps, grants and checkpoints.

        Raises:
            NotFoundError: no such session.
        """
        validate_id(id)
        result = self._session.execute(delete(AgentSession).where(AgentSession.id == id))
        if result.rowcount == 0:  # type: ignore[attr-defined]
            raise NotFoundError(f"no session {id!r}", id=id)

    @operation(writes=False)
    def list(
        self,
        *,
        app_name: str | None = None,
        user_id: str | None = None,
        status: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[SessionSummary]:
        """Sessions, most recently updated first (id breaks ties), one page at a time.

        Raises:
            ValidationError: a bad limit, or a cursor that is tampered with or comes
                from a listing with other filters.
        """
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_PAGE_SIZE:
            raise ValidationError(
                f"limit must be 1 to {MAX_PAGE_SIZE}, got {limit!r}", path="limit"
            )
        filters = (
            _scope(app_name, field="app_name"),
            _scope(user_id, field="user_id"),
            _text(status, field="status", max_length=32),
        )
        params: dict[str, Any] = dict(zip(("app_name", "user_id", "status"), filters, strict=True))
        params["n"] = limit + 1
        if cursor is not None:
            after = _Cursor.decode(cursor, filters)
            params.update(after_updated_at=after.updated_at, after_id=after.id)
        query = _listing(*(value is not None for value in filters), after=cursor is not None)
        rows = self._session.connection().execute(query, params).all()
        items = [summary_of(row) for row in rows[:limit]]
        next_cursor = None
        if len(rows) > limit:
            last = items[-1]
            next_cursor = _Cursor(last.updated_at, last.id).encode(filters)
        return Page[SessionSummary](items=items, next_cursor=next_cursor)

    @operation(writes=False)
    def most_recent(
        self, *, app_name: str | None = None, user_id: str | None = None
    ) -> SessionSummary | None:
        """The most recently updated session ("continue where I left off"), or None."""
        params = {
            "app_name": _scope(app_name, field="app_name"),
            "user_id": _scope(user_id, field="user_id"),
            "n": 1,
        }
        query = _listing(app_name is not None, user_id is not None, False, after=False)
        row = self._session.connection().execute(query, params).first()
        return summary_of(row) if row is not None else None


@functools.cache
def _listing(app_name: bool, user_id: bool, status: bool, *, after: bool) -> Select[Any]:
    """The listing statement for the filters given (built once per combination), newest
    first; with ``after``, the keyset page after a cursor's (updated_at, id)."""
    query = select(*_SUMMARY_COLUMNS)
    for column, given in (
        (_SESSIONS.c.app_name, app_name),
        (_SESSIONS.c.user_id, user_id),
        (_SESSIONS.c.status, status),
    ):
        if given:
            query = query.where(column == bindparam(column.name))
    if after:
        # (updated_at, id) < (:u, :i), spelled so every optimizer ranges over the
        # (updated_at, id) index: MariaDB plans the row-value comparison as a scan of
        # the whole index from the top (a page at 90% of 100,000 sessions took 110 ms
        # instead of 2), while a bound on the leading column is a range.
        updated_at = bindparam("after_updated_at", type_=_SESSIONS.c.updated_at.type)
        id = bindparam("after_id", type_=_SESSIONS.c.id.type)
        query = query.where(
            _SESSIONS.c.updated_at <= updated_at,
            or_(_SESSIONS.c.updated_at < updated_at, _SESSIONS.c.id < id),
        )
    order = (_SESSIONS.c.updated_at.desc(), _SESSIONS.c.id.desc())
    return query.order_by(*order).limit(bindparam("n", type_=Integer()))


class _Cursor:
    """A keyset position (updated_at, id), opaque to callers and checked on the way back.

    The encoding carries a checksum and a fingerprint of the listing's filters, so a
    tampered or truncated cursor, or one from another listing, is a ValidationError.
    """

    def __init__(self, updated_at: datetime, id: str) -> None:
        self.updated_at = updated_at
        self.id = id

    @staticmethod
    def _digest(body: bytes, filters: tuple[str | None, ...]) -> str:
        material = body + json.dumps(filters).encode()
        return hashlib.sha256(material).hexdigest()[:16]

    def encode(self, filters: tuple[str | None, ...]) -> str:
        body = json.dumps([self.updated_at.isoformat(), self.id]).encode()
        token = base64.urlsafe_b64encode(body).decode().rstrip("=")
        return f"{token}.{self._digest(body, filters)}"

    @classmethod
    def decode(cls, cursor: object, filters: tuple[str | None, ...]) -> _Cursor:
        problem = ValidationError(
            "invalid cursor: pass back the next_cursor of the same listing, unchanged",
            path="cursor",
        )
        if not isinstance(cursor, str) or cursor.count(".") != 1 or len(cursor) > 1024:
            raise problem
        token, digest = cursor.split(".")
        try:
            body = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            if cls._digest(body, filters) != digest:
                raise problem
            stamp, id = json.loads(body)
            position = cls(datetime.fromisoformat(stamp), validate_id(id))
        except (ValueError, TypeError, InvalidIdError):
            raise problem from None
        if position.updated_at.tzinfo is None:
            raise problem
        return position


class AsyncSessionRepository:
    """Sessions on the async API: each call is handed to the sync ``SessionRepository`` in one
    greenlet hop (on a ledger, a transaction of its own; in a unit of work, its own)."""

    def __init__(self, proxied: SessionRepository) -> None:
        self._proxied = proxied

    # --- async proxies of SessionRepository via _proxied ---
    # (generated by tools/generate_async.py; do not edit by hand)
    async def create(
        self,
        id: str | None = None,
        *,
        app_name: str | None = None,
        user_id: str | None = None,
        title: str | None = None,
        model: str | None = None,
        state: dict[str, Any] | None = None,
    ) -> SessionRecord:
        """Create a session; an id is generated (sortable by creation time) when none is given.

        Raises:
            ConflictError: reason ``exists`` when the id is taken.
            InvalidIdError, ValidationError: bad id, scope, title, model or state.
        """
        return await spawn(
            self._proxied.create,
            id,
            app_name=app_name,
            user_id=user_id,
            title=title,
            model=model,
            state=state,
        )

    async def get(self, id: str) -> SessionRecord:
        """The session ``id``.

        Raises:
            NotFoundError: no such session.
        """
        return await spawn(self._proxied.get, id)

    async def get_or_none(self, id: str) -> SessionRecord | None:
        """The session ``id``, or None when there is none."""
        return await spawn(self._proxied.get_or_none, id)

    async def exists(self, id: str) -> bool:
        """Whether session ``id`` exists."""
        return await spawn(self._proxied.exists, id)

    async def get_or_create(self, /, id: str, **fields: Any) -> tuple[SessionRecord, bool]:
        """The session ``id`` and False, or a new one made with ``fields`` and True.

        Two concurrent callers for one id get one session: one creates it, the other
        gets the stored one.
        """
        return await spawn(self._proxied.get_or_create, id, **fields)

    async def save(self, record: SessionRecord) -> SessionRecord:
        """Write the record's title, model and state, if its revision is still the stored one.

        Returns the record at its new revision (one more).

        Raises:
            ConflictError: reason ``stale`` when another writer saved first, ``deleted``
                when another writer deleted the session.
            ValidationError: a title, model or state that cannot be stored.
        """
        return await spawn(self._proxied.save, record)

    async def finalize(self, id: str, summary: RunSummary) -> SessionRecord:
        """Record how a run ended: the session's status and its last run, overwriting the
        previous run's. Writes only columns ``save`` never writes, so neither undoes the
        other, and leaves the revision alone.

        Raises:
            NotFoundError: no such session (a late writer never resurrects a deleted one).
            ValidationError: a summary that is not a RunSummary (or a dict of one).
        """
        return await spawn(self._proxied.finalize, id, summary)

    async def delete(self, id: str) -> None:
        """Delete session ``id`` with its messages, steps, grants and checkpoints.

        Raises:
            NotFoundError: no such session.
        """
        return await spawn(self._proxied.delete, id)

    async def list(
        self,
        *,
        app_name: str | None = None,
        user_id: str | None = None,
        status: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[SessionSummary]:
        """Sessions, most recently updated first (id breaks ties), one page at a time.

        Raises:
            ValidationError: a bad limit, or a cursor that is tampered with or comes
                from a listing with other filters.
        """
        return await spawn(
            self._proxied.list,
            app_name=app_name,
            user_id=user_id,
            status=status,
            limit=limit,
            cursor=cursor,
        )

    async def most_recent(
        self, *, app_name: str | None = None, user_id: str | None = None
    ) -> SessionSummary | None:
        """The most recently updated session ("continue where I left off"), or None."""
        return await spawn(self._proxied.most_recent, app_name=app_name, user_id=user_id)

    # --- end of async proxies ---
