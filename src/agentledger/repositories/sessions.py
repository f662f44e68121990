"""Sessions: create, read, save with optimistic concurrency, finalize, delete, list."""

from __future__ import annotations

import builtins
import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Integer, Select, bindparam, delete, select, update

from .._checks import after_keyset, bounded_int, decode_cursor, encode_cursor
from .._concurrency import spawn
from .._json import check_json, check_object
from .._translate import duplicate_as
from ..clock import utc
from ..errors import ConflictError, NotFoundError, ValidationError
from ..ids import new_id, validate_id
from ..models import AgentSession
from ..records import (
    Page,
    RunSummary,
    SessionOverview,
    SessionRecord,
    SessionSelection,
    SessionSummary,
)
from ._base import Repository, operation
from ._session_row import (
    SESSIONS,
    SUMMARY_COLUMNS,
    flush_versioned,
    load_record,
    selected,
    session_exists,
    summary_of,
    versioned_row,
    written_record,
)
from .checkpoints import CheckpointRepository
from .grants import GrantRepository
from .messages import MessageRepository
from .steps import StepRepository

MAX_PAGE_SIZE = 1000
MAX_BULK = 10_000
"""The most sessions one bulk operation (``stale``, ``with_checkpoints``) returns."""
OVERVIEW_MAX = 10_000


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
        with duplicate_as(lambda: _exists(row.id)):
            self._session.flush()
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
            with duplicate_as(lambda: _exists(id)):
                self._session.add(row)
                self._session.flush()
        except ConflictError:
            savepoint.rollback()
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
            update(SESSIONS)
            .where(SESSIONS.c.id == id)
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
        bounded_int(limit, "limit", low=1, high=MAX_PAGE_SIZE)
        filters = (
            _scope(app_name, field="app_name"),
            _scope(user_id, field="user_id"),
            _text(status, field="status", max_length=32),
        )
        params: dict[str, Any] = dict(zip(("app_name", "user_id", "status"), filters, strict=True))
        params["n"] = limit + 1
        if cursor is not None:
            params["after_updated_at"], params["after_id"] = _decode_position(cursor, filters)
        query = _listing(*(value is not None for value in filters), after=cursor is not None)
        rows = self._session.connection().execute(query, params).all()
        items = [summary_of(row) for row in rows[:limit]]
        next_cursor = None
        if len(rows) > limit:
            last = items[-1]
            next_cursor = encode_cursor([last.updated_at.isoformat(), last.id], filters)
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

    @operation(writes=False)
    def overview(
        self, id: str, *, messages: int = 1000, steps: int = 50, checkpoints: int = 20
    ) -> SessionOverview:
        """Session ``id`` with its last ``messages`` messages, last ``steps`` steps, active
        grants and newest ``checkpoints`` unexpired checkpoints (each 0 to 10,000; 0 skips;
        checkpoints at most 1,000), read in one transaction so the parts agree.

        Raises:
            NotFoundError: no such session.
        """
        counts = {
            name: bounded_int(value, name, high=OVERVIEW_MAX)
            for name, value in (
                ("messages", messages),
                ("steps", steps),
                ("checkpoints", checkpoints),
            )
        }
        work = self._work
        return SessionOverview(
            session=load_record(self._session, validate_id(id)),
            messages=MessageRepository(work).last(id, counts["messages"]) if messages else [],
            steps=StepRepository(work).last(id, counts["steps"]) if steps else [],
            grants=GrantRepository(work).active(id),
            checkpoints=CheckpointRepository(work).list(id, limit=counts["checkpoints"]).items
            if checkpoints
            else [],
        )

    @operation(writes=False)
    def stale(
        self,
        selection: SessionSelection,
        *,
        after: tuple[datetime, str] | None = None,
        limit: int = 500,
    ) -> builtins.list[SessionSummary]:
        """Up to ``limit`` sessions of ``selection``, least recently updated first, after
        the (updated_at, id) position ``after``: the candidates of a retention rule."""
        bounded_int(limit, "limit", low=1, high=MAX_BULK)
        query = select(*SUMMARY_COLUMNS).where(*selected(selection))
        order = (SESSIONS.c.updated_at, SESSIONS.c.id)
        if after is not None:
            query = query.where(after_keyset(order, after))
        rows = self._session.execute(query.order_by(*order).limit(limit)).all()
        return [summary_of(row) for row in rows]

    @operation(writes=True)
    def delete_stale(self, ids: Sequence[str], *, updated_before: datetime) -> builtins.list[str]:
        """Delete the sessions of ``ids`` (with all their rows) that are still not updated
        since ``updated_before``, judged under their row locks; returns the ids that went."""
        locked = select(SESSIONS.c.id).where(
            SESSIONS.c.id.in_(sorted(set(ids))),
            SESSIONS.c.updated_at < utc(updated_before, field="updated_before"),
        )
        still = list(
            self._session.execute(locked.order_by(SESSIONS.c.id).with_for_update()).scalars()
        )
        if still:
            self._session.execute(delete(SESSIONS).where(SESSIONS.c.id.in_(still)))
        return still

    @operation(writes=False)
    def with_checkpoints(
        self, selection: SessionSelection, *, after: str | None = None, limit: int = 500
    ) -> builtins.list[tuple[str, int]]:
        """Up to ``limit`` sessions of ``selection`` that ever had a checkpoint, by id after
        ``after``, each with its checkpoint counter (an upper bound of how many it holds)."""
        bounded_int(limit, "limit", low=1, high=MAX_BULK)
        query = select(SESSIONS.c.id, SESSIONS.c.checkpoint_seq).where(
            SESSIONS.c.checkpoint_seq > 0, *selected(selection)
        )
        if after is not None:
            query = query.where(SESSIONS.c.id > after)
        rows = self._session.execute(query.order_by(SESSIONS.c.id).limit(limit)).all()
        return [(row.id, row.checkpoint_seq) for row in rows]


@functools.cache
def _listing(app_name: bool, user_id: bool, status: bool, *, after: bool) -> Select[Any]:
    """The listing statement for the filters given (built once per combination), newest
    first; with ``after``, the keyset page after a cursor's (updated_at, id)."""
    query = select(*SUMMARY_COLUMNS)
    for column, given in (
        (SESSIONS.c.app_name, app_name),
        (SESSIONS.c.user_id, user_id),
        (SESSIONS.c.status, status),
    ):
        if given:
            query = query.where(column == bindparam(column.name))
    if after:
        position = (
            bindparam("after_updated_at", type_=SESSIONS.c.updated_at.type),
            bindparam("after_id", type_=SESSIONS.c.id.type),
        )
        columns = (SESSIONS.c.updated_at, SESSIONS.c.id)
        query = query.where(after_keyset(columns, position, descending=True))
    order = (SESSIONS.c.updated_at.desc(), SESSIONS.c.id.desc())
    return query.order_by(*order).limit(bindparam("n", type_=Integer()))


def _decode_position(cursor: object, filters: tuple[str | None, ...]) -> tuple[datetime, str]:
    """The (updated_at, id) a listing cursor holds; ValidationError for anything else."""
    position = decode_cursor(cursor, filters, what="the same listing")
    try:
        stamp, id = position
        updated_at = datetime.fromisoformat(stamp)
        if updated_at.tzinfo is None:
            raise ValueError("naive")
        return updated_at, validate_id(id)
    except (ValueError, TypeError):
        raise ValidationError(
            "invalid cursor: pass back the next_cursor of the same listing, unchanged",
            path="cursor",
        ) from None


def _exists(id: str) -> ConflictError:
    return ConflictError(f"session {id!r} already exists", reason="exists", id=id)


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

    async def overview(
        self, id: str, *, messages: int = 1000, steps: int = 50, checkpoints: int = 20
    ) -> SessionOverview:
        """Session ``id`` with its last ``messages`` messages, last ``steps`` steps, active
        grants and newest ``checkpoints`` unexpired checkpoints (each 0 to 10,000; 0 skips;
        checkpoints at most 1,000), read in one transaction so the parts agree.

        Raises:
            NotFoundError: no such session.
        """
        return await spawn(
            self._proxied.overview, id, messages=messages, steps=steps, checkpoints=checkpoints
        )

    async def stale(
        self,
        selection: SessionSelection,
        *,
        after: tuple[datetime, str] | None = None,
        limit: int = 500,
    ) -> builtins.list[SessionSummary]:
        """Up to ``limit`` sessions of ``selection``, least recently updated first, after
        the (updated_at, id) position ``after``: the candidates of a retention rule."""
        return await spawn(self._proxied.stale, selection, after=after, limit=limit)

    async def delete_stale(
        self, ids: Sequence[str], *, updated_before: datetime
    ) -> builtins.list[str]:
        """Delete the sessions of ``ids`` (with all their rows) that are still not updated
        since ``updated_before``, judged under their row locks; returns the ids that went."""
        return await spawn(self._proxied.delete_stale, ids, updated_before=updated_before)

    async def with_checkpoints(
        self, selection: SessionSelection, *, after: str | None = None, limit: int = 500
    ) -> builtins.list[tuple[str, int]]:
        """Up to ``limit`` sessions of ``selection`` that ever had a checkpoint, by id after
        ``after``, each with its checkpoint counter (an upper bound of how many it holds)."""
        return await spawn(self._proxied.with_checkpoints, selection, after=after, limit=limit)

    # --- end of async proxies ---
