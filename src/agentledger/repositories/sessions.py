"""Sessions: create, read, save with optimistic concurrency, finalize, delete, list;
and the same by a caller's external key.

A session may carry the caller's own key (a framework's thread or session id): any
text up to 1,024 characters, unique within its (app_name, user_id) scope. NULL scopes
are distinct in a unique constraint on every dialect, and MariaDB cannot index 1,024
characters, so the unique key is ``external_key_hash``, SHA-256 of an unambiguous
encoding of the three; a look-up is one indexed query on it plus an exact comparison
of the stored key.
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import json
from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import BindParameter, Integer, Select, bindparam, delete, or_, select, update

from .._checks import (
    after_keyset,
    bounded_int,
    checked_text,
    decode_cursor,
    encode_cursor,
    scope_value,
)
from .._dialects import locking
from .._json import check_json, check_object
from .._limits import MAX_EXTERNAL_KEY_LENGTH
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
from ._base import Repository, Work, operation
from ._session_row import (
    RECORD_COLUMNS,
    SESSIONS,
    SUMMARY_COLUMNS,
    SUMMARY_EXTRAS,
    Lock,
    insert_session_if_absent,
    load_record,
    record_of,
    selected,
    session_exists,
    summary_of,
    write_versioned,
)
from ._statements import creators_take_turns
from .checkpoints import CheckpointRepository
from .grants import GrantRepository
from .messages import MessageRepository
from .steps import StepRepository

MAX_PAGE_SIZE = 1000
MAX_BULK = 10_000
"""The most sessions one bulk operation (``stale``, ``with_checkpoints``) returns."""
OVERVIEW_MAX = 10_000
Included = Literal["external_key", "state", "last_message_at"]
"""What a listing can include besides the summary columns (``list(include=...)``)."""


def _text(value: object, *, field: str, max_length: int) -> str | None:
    if value is None:
        return None
    return checked_text(value, field, max_length=max_length, min_length=0)


@functools.lru_cache(maxsize=4096)
def external_key_hash(app_name: str | None, user_id: str | None, key: str) -> str:
    """The unique key of a keyed session: SHA-256 (hex) of the JSON array
    ``[app_name, user_id, key]``, in which NULL (``null``) and text never coincide.
    Cached: a framework's store looks the same few threads up on every call."""
    material = json.dumps([app_name, user_id, key], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def _key_params(
    key: object, app_name: object, user_id: object, *, field: str = "key"
) -> dict[str, str]:
    """The bind parameters of a look-up by key, every part validated first."""
    checked = checked_text(key, field, max_length=MAX_EXTERNAL_KEY_LENGTH)
    app = scope_value(app_name, field="app_name")
    user = scope_value(user_id, field="user_id")
    return {"hash": external_key_hash(app, user, checked), "key": checked}


_BY_KEY = (SESSIONS.c.external_key_hash == bindparam("hash")) & (
    SESSIONS.c.external_key == bindparam("key")
)
_LOAD_BY_KEY: dict[Lock | None, Select[Any]] = {
    None: select(*RECORD_COLUMNS).where(_BY_KEY),
    "share": locking(select(*RECORD_COLUMNS).where(_BY_KEY), read=True),
    "update": locking(select(*RECORD_COLUMNS).where(_BY_KEY)),
}


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
        external_key: str | None = None,
    ) -> SessionRecord:
        """Create a session; an id is generated (sortable by creation time) when none is given.

        ``external_key`` is the caller's own key for it (any text up to 1,024 characters),
        unique within (app_name, user_id): find it again with ``get_by_key``.

        Raises:
            ConflictError: reason ``exists`` when the id (or the key in its scope) is taken.
            InvalidIdError, ValidationError: bad id, scope, key, title, model or state.
        """
        now = self._work.settings.now()
        row = AgentSession(
            **self._new_values(
                id,
                now,
                app_name=app_name,
                user_id=user_id,
                title=title,
                model=model,
                state=state,
                external_key=external_key,
            )
        )
        self._session.add(row)
        with duplicate_as(lambda: _exists(row.id, row.external_key)):
            self._session.flush()
        return load_record(self._session, row.id)

    def _new_values(
        self,
        id: str | None,
        now: datetime,
        *,
        app_name: str | None = None,
        user_id: str | None = None,
        title: str | None = None,
        model: str | None = None,
        state: dict[str, Any] | None = None,
        external_key: str | None = None,
    ) -> dict[str, Any]:
        """A new session's column values, checked: every column but the revision and
        those a new session leaves NULL (its last run, latest checkpoint, preview)."""
        limits = self._work.settings.limits
        scope = (scope_value(app_name, field="app_name"), scope_value(user_id, field="user_id"))
        key = None
        if external_key is not None:
            key = checked_text(external_key, "external_key", max_length=MAX_EXTERNAL_KEY_LENGTH)
        return dict(
            id=validate_id(id) if id is not None else new_id(now),
            app_name=scope[0],
            user_id=scope[1],
            external_key=key,
            external_key_hash=None if key is None else external_key_hash(*scope, key),
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
        unknown = set(fields) - {"app_name", "user_id", "title", "model", "state", "external_key"}
        if unknown:
            raise ValidationError(f"unknown session fields: {sorted(unknown)}", path="fields")
        row = AgentSession(**self._new_values(id, self._work.settings.now(), **fields))

        def find(lock: Lock | None) -> SessionRecord | None:
            try:
                return load_record(self._session, id, lock=lock)
            except NotFoundError:
                return None

        # FOR UPDATE, not FOR SHARE: the unit of work is going to write this row, and a
        # shared lock it later upgraded (appending to it) deadlocks with another
        # creator holding one too.
        return self._get_or_insert(find, row, race_lock="update")

    def _get_or_insert(
        self,
        find: Callable[[Lock | None], SessionRecord | None],
        row: AgentSession,
        *,
        race_lock: Lock,
    ) -> tuple[SessionRecord, bool]:
        """The session ``find`` finds and False, or ``row`` inserted and True. A
        concurrent creator that wins the insert makes this one find its row (read with
        ``race_lock``, since a plain read could miss it under MariaDB's snapshot)."""
        found = find(None)
        if found is not None:
            return found, False
        with creators_take_turns(self._session.connection(), row.external_key_hash or row.id):
            savepoint = self._session.begin_nested()
            try:
                with duplicate_as(lambda: _exists(row.id, row.external_key)):
                    self._session.add(row)
                    self._session.flush()
            except ConflictError:
                savepoint.rollback()
                found = find(race_lock)
                if found is None:
                    raise
                return found, False
            savepoint.commit()
        return load_record(self._session, row.id), True

    @operation(writes=False)
    def get_by_key(
        self, key: str, *, app_name: str | None = None, user_id: str | None = None
    ) -> SessionRecord:
        """The session whose external key in scope (app_name, user_id) is ``key``; a None
        scope is the session's NULL scope, not "any". One indexed query.

        Raises:
            NotFoundError: no session has that key in that scope.
            ValidationError: a bad key or scope.
        """
        found = self._by_key(_key_params(key, app_name, user_id))
        if found is None:
            raise NotFoundError(f"no session with key {key!r} in that scope")
        return found

    @operation(writes=False)
    def get_by_key_or_none(
        self, key: str, *, app_name: str | None = None, user_id: str | None = None
    ) -> SessionRecord | None:
        """The session with external key ``key`` in scope (app_name, user_id), or None."""
        return self._by_key(_key_params(key, app_name, user_id))

    def _by_key(self, params: dict[str, str], lock: Lock | None = None) -> SessionRecord | None:
        row = self._session.connection().execute(_LOAD_BY_KEY[lock], params).first()
        return None if row is None else record_of(row)

    @operation(writes=True)
    def get_or_create_by_key(
        self,
        key: str,
        *,
        app_name: str | None = None,
        user_id: str | None = None,
        id: str | None = None,
        title: str | None = None,
        model: str | None = None,
        state: dict[str, Any] | None = None,
    ) -> tuple[SessionRecord, bool]:
        """The session with external key ``key`` in scope (app_name, user_id) and False,
        or a new one with that key (and ``id``, else a generated one) and True.

        Two concurrent callers for one key get one session. The fields of a new session
        are validated even when one is found.

        Raises:
            ConflictError: reason ``exists`` when ``id`` is taken by another session.
            InvalidIdError, ValidationError: a bad key, scope, id or field.
        """
        params = _key_params(key, app_name, user_id)
        row = AgentSession(
            **self._new_values(
                id,
                self._work.settings.now(),
                app_name=app_name,
                user_id=user_id,
                title=title,
                model=model,
                state=state,
                external_key=key,
            )
        )
        # FOR UPDATE after a lost race, as the unit of work goes on to write the row.
        return self._get_or_insert(lambda lock: self._by_key(params, lock), row, race_lock="update")

    @operation(writes=True)
    def delete_by_key(
        self, key: str, *, app_name: str | None = None, user_id: str | None = None
    ) -> None:
        """Delete the session with external key ``key`` in scope (app_name, user_id), with
        its messages, steps, grants and checkpoints.

        Raises:
            NotFoundError: no session has that key in that scope.
        """
        params = _key_params(key, app_name, user_id)
        statement = delete(AgentSession).where(
            AgentSession.external_key_hash == params["hash"],
            AgentSession.external_key == params["key"],
        )
        if self._session.execute(statement).rowcount == 0:  # type: ignore[attr-defined]
            raise NotFoundError(f"no session with key {key!r} in that scope")

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
        values = {
            "title": title,
            "model": model,
            "state": state,
            "updated_at": self._work.settings.now(),
        }
        return write_versioned(self._session, record, values)

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
        check_json(
            summary.model_dump(mode="json"), path="summary", limits=self._work.settings.limits
        )
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
        include: Collection[Included] = (),
        id_prefix: str | None = None,
        search: str | None = None,
        external_key: str | None = None,
    ) -> Page[SessionSummary]:
        """Sessions, most recently updated first (id breaks ties), one page at a time.

        ``include`` adds columns to each row in the same query: ``"external_key"``,
        ``"state"`` (the session state; off by default to keep listings lean),
        ``"last_message_at"`` (the newest message's time, the caller's own where it
        gave one: a framework's last event).
        ``id_prefix`` keeps the ids that start with it (a framework's sessions:
        ``integrations.framework_id_prefix``); ``search`` keeps the sessions whose title,
        opening user message, id or external key (a framework's own id for it: a
        LangGraph thread id, an ADK or OpenAI Agents session id) contains it, ignoring
        case; ``external_key`` keeps the sessions with that external key (compared
        exactly) in any scope, or in the one ``app_name`` and ``user_id`` narrow it to: a
        framework's thread or session id when its scope is not known (``get_by_key`` is
        the one-query look-up when it is). All three are conditions on the walk of the
        ``updated_at`` index, not index look-ups of their own: for a prefix, term or key
        that few sessions match, the database reads far into that index (or,
        PostgreSQL's choice, scans the table and sorts the few matches).

        Raises:
            ValidationError: a bad limit, include, prefix, search text or key, or a cursor
                that is tampered with or comes from a listing with other filters.
        """
        bounded_int(limit, "limit", low=1, high=MAX_PAGE_SIZE)
        extras = _included(include)
        filters: tuple[str | None, ...] = (
            scope_value(app_name, field="app_name"),
            scope_value(user_id, field="user_id"),
            _text(status, field="status", max_length=32),
            _pattern(id_prefix, field="id_prefix", max_length=128, around="{}%"),
            _pattern(search, field="search", max_length=256, around="%{}%"),
        )
        names: tuple[str, ...] = ("app_name", "user_id", "status", "id_prefix", "search")
        if external_key is not None:  # a sixth filter only when given: older cursors hold five
            key = checked_text(external_key, "external_key", max_length=MAX_EXTERNAL_KEY_LENGTH)
            filters, names = (*filters, key), (*names, "external_key")
        params: dict[str, Any] = dict(zip(names, filters, strict=True))
        params["n"] = limit + 1
        if cursor is not None:
            params["after_updated_at"], params["after_id"] = _decode_position(cursor, filters)
        query = _listing(
            *(value is not None for value in filters), after=cursor is not None, include=extras
        )
        rows = self._session.connection().execute(query, params).all()
        items = [summary_of(row, extras) for row in rows[:limit]]
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
            "app_name": scope_value(app_name, field="app_name"),
            "user_id": scope_value(user_id, field="user_id"),
            "n": 1,
        }
        query = _listing(
            app_name is not None, user_id is not None, False, False, False, after=False
        )
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
        still = list(self._session.execute(locking(locked.order_by(SESSIONS.c.id))).scalars())
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


def _included(include: object) -> tuple[str, ...]:
    """The listing extras asked for, in ``SUMMARY_EXTRAS`` order."""
    if isinstance(include, str) or not isinstance(include, Collection):
        raise ValidationError(
            f"include takes a list of {sorted(SUMMARY_EXTRAS)}, got {include!r}", path="include"
        )
    unknown = set(include) - set(SUMMARY_EXTRAS)
    if unknown:
        raise ValidationError(
            f"include: unknown {sorted(map(str, unknown))}; choose from {sorted(SUMMARY_EXTRAS)}",
            path="include",
        )
    return tuple(name for name in SUMMARY_EXTRAS if name in include)


def _pattern(value: object, *, field: str, max_length: int, around: str) -> str | None:
    """A LIKE pattern matching ``value`` literally (``%``, ``_`` and the escape ``/``
    escaped) inside ``around``; None when not given."""
    text = _text(value, field=field, max_length=max_length)
    if text is None:
        return None
    literal = text.replace("/", "//").replace("%", "/%").replace("_", "/_")
    return around.format(literal)


@functools.cache
def _listing(
    app_name: bool,
    user_id: bool,
    status: bool,
    id_prefix: bool = False,
    search: bool = False,
    external_key: bool = False,
    *,
    after: bool,
    include: Sequence[str] = (),
) -> Select[Any]:
    """The listing statement for the filters given (built once per combination), newest
    first; with ``after``, the keyset page after a cursor's (updated_at, id); the
    ``include``d extras after the summary columns."""
    query = select(*SUMMARY_COLUMNS, *(SUMMARY_EXTRAS[name] for name in include))
    for column, given in (
        (SESSIONS.c.app_name, app_name),
        (SESSIONS.c.user_id, user_id),
        (SESSIONS.c.status, status),
    ):
        if given:
            query = query.where(column == bindparam(column.name))
    if id_prefix:
        query = query.where(SESSIONS.c.id.like(bindparam("id_prefix"), escape="/"))
    if search:
        term: BindParameter[str] = bindparam("search")
        query = query.where(
            or_(
                SESSIONS.c.title.ilike(term, escape="/"),
                SESSIONS.c.preview.ilike(term, escape="/"),
                SESSIONS.c.id.ilike(term, escape="/"),
                SESSIONS.c.external_key.ilike(term, escape="/"),
            )
        )
    if external_key:
        query = query.where(SESSIONS.c.external_key == bindparam("external_key"))
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


def keyed_session_id(
    work: Work,
    key: str,
    *,
    app_name: str | None,
    user_id: str | None,
    id: str,
    find: Callable[[], str | None],
) -> str:
    """The id of the session with external key ``key`` in scope (app_name, user_id), a
    new one (``id``) created when there is none, in ``work``'s transaction: the
    ``get_or_create_by_key`` of a writer that needs only the id and has just found no
    session with ``find`` (a LangGraph thread's first write). The new session is one
    INSERT that skips a stored key (``_session_row.insert_session_if_absent``), which runs
    on driver SQL too; where it skipped, ``find`` again gives the concurrent creator's
    session. Where a dialect cannot tell (MariaDB/MySQL), ``get_or_create_by_key``.

    Raises:
        ConflictError: reason ``exists`` when ``id`` is taken by another session.
    """
    values = new_keyed_session(work, key, app_name=app_name, user_id=user_id, id=id)
    inserted = insert_session_if_absent(work.connection(), values)
    if inserted is None:
        sessions = SessionRepository(work)
        record, _ = sessions.get_or_create_by_key(key, app_name=app_name, user_id=user_id, id=id)
        return record.id
    if inserted:
        return str(values["id"])
    found = find()
    if found is None:
        raise _exists(values["id"], values["external_key"])
    return found


def new_keyed_session(
    work: Work, key: str, *, app_name: str | None, user_id: str | None, id: str
) -> dict[str, Any]:
    """The column values of a new session with external key ``key`` in scope
    (app_name, user_id), checked as ``SessionRepository.create`` checks them, for a
    Core INSERT: its revision 1, as the ORM's version counter would start it."""
    now = work.settings.now()
    sessions = SessionRepository(work)
    values = dict.fromkeys(_SESSION_COLUMNS)  # NULL where a new session sets nothing
    values.update(
        sessions._new_values(id, now, app_name=app_name, user_id=user_id, external_key=key)
    )
    values["revision"] = 1
    return values


_SESSION_COLUMNS = tuple(AgentSession.__table__.c.keys())
"""Every column of a session row, from the table: a keyed session's Core INSERT names
each, NULL where ``_new_values`` sets none, so a column added later is never left out."""


def _exists(id: str, key: str | None = None) -> ConflictError:
    if key is None:
        return ConflictError(f"session {id!r} already exists", reason="exists", id=id)
    return ConflictError(
        f"session {id!r}, or a session with key {key!r} in the same scope, already exists",
        reason="exists",
        id=id,
    )
