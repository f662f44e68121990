"""Checkpoints: what a paused run needs to resume, with lineage, forks and expiry.

The session row carries the checkpoint counter (``checkpoint_seq``) and a pointer to
its newest stored checkpoint (``latest_checkpoint_ref``). Every write that adds or
removes checkpoints of a session takes that row's lock first, so the pointer always
names the session's highest-seq checkpoint (expired or not), or is NULL, and the
session's checkpoints cannot change under a writer that holds the lock.

``save(..., parent=X)`` is a compare-and-set: one UPDATE of the session row that
bumps the counter and moves the pointer ``WHERE latest_checkpoint_ref = X`` (and X has
not expired). Two resumers of one pause race on that row; the second finds the pointer
moved and gets ``ConflictError("parent")``. Only when that UPDATE matches nothing is
there a second look, under the row lock: it accepts X only if X is what ``latest``
answers (the pointer names an expired checkpoint and everything after X expired).
Without a parent, the new checkpoint's ``parent_ref`` is what ``latest`` answered.
Checkpoint writes never bump the session's revision.

Locking on MariaDB/MySQL (REPEATABLE READ): reads that decide something read the
latest committed rows with locking reads, since a plain SELECT would answer from the
transaction's first snapshot. They are primary-key lookups, or range reads over one
session on the (session_id, seq) index that end on a row of that session, so they
lock that session's rows and not its neighbours'. Deletes go by primary key. Reads
that only name a lineage or explain a conflict are plain.

Here are the statements and the operations; what a stored checkpoint looks like (its
ref, its payload's checks, a row as a ``Checkpoint``) is ``checkpoint_payloads``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast, get_args

from sqlalchemy import (
    ColumnElement,
    Row,
    Select,
    Table,
    Update,
    and_,
    bindparam,
    delete,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.orm import Session

from .._checks import after_keyset, bounded_int, decode_cursor, encode_cursor
from .._dialects import capabilities, dialect_names, locking
from ..clock import utc
from ..errors import (
    ConflictError,
    NotFoundError,
    ValidationError,
)
from ..ids import new_id, validate_id
from ..models import AgentCheckpoint, AgentSession
from ..models.types import json_text
from ..records import (
    Checkpoint,
    CheckpointInfo,
    CheckpointPayload,
    Page,
    SessionSelection,
)
from ._base import Repository, operation
from ._session_row import lock_sessions, selected, session_exists
from ._statements import CounterForm, counter_after_update, counter_form, insert_json_text
from .checkpoint_payloads import checked_ref, checkpoint_of, payload_text

_CHECKPOINTS = cast(Table, AgentCheckpoint.__table__)
_SESSIONS = cast(Table, AgentSession.__table__)
_INFO_COLUMNS = (
    _CHECKPOINTS.c.ref,
    _CHECKPOINTS.c.session_id,
    _CHECKPOINTS.c.seq,
    _CHECKPOINTS.c.parent_ref,
    _CHECKPOINTS.c.created_at,
    _CHECKPOINTS.c.expires_at,
)
_READ = select(*_INFO_COLUMNS, json_text(_CHECKPOINTS.c.payload).label("payload"))
_ALIVE = or_(
    _CHECKPOINTS.c.expires_at.is_(None),
    _CHECKPOINTS.c.expires_at > bindparam("now", type_=_CHECKPOINTS.c.expires_at.type),
)
# Built once: building and cache-keying a statement per call cost more than running it.
_LATEST = (
    _READ.where(_CHECKPOINTS.c.session_id == bindparam("id"), _ALIVE)
    .order_by(_CHECKPOINTS.c.seq.desc())
    .limit(1)
)
_GET = _READ.where(_CHECKPOINTS.c.ref == bindparam("ref"), _ALIVE)
_LOCK_POINTER = locking(
    select(_SESSIONS.c.latest_checkpoint_ref).where(_SESSIONS.c.id == bindparam("id"))
)
_LOCATE = select(_CHECKPOINTS.c.session_id, _CHECKPOINTS.c.seq, _CHECKPOINTS.c.expires_at).where(
    _CHECKPOINTS.c.ref == bindparam("ref")
)

_LOCATE_LOCKED = {exclusive: locking(_LOCATE, read=not exclusive) for exclusive in (True, False)}
_LIST = select(*_INFO_COLUMNS, _CHECKPOINTS.c.size)
CheckpointInfos = list[CheckpointInfo]
"""Checkpoints without their payloads, as bulk operations return them."""
_Located = Row[Any, Any, Any]
"""(session_id, seq, expires_at) of one checkpoint."""
MAX_PAGE_SIZE = 1000
PURGE_BATCH = 500
"""How many expired checkpoints ``purge_expired`` deletes per transaction by default."""
MAX_PURGE_BATCH = 10_000
_DELETE_CHUNK = 1000


def _checkpoint_seq_statement(form: CounterForm) -> Update:
    """The UPDATE of ``allocate_checkpoint_seq`` without a condition, with its new
    counter returned, put through ``LAST_INSERT_ID(expr)`` or left to be read back."""
    table = cast(Table, AgentSession.__table__)
    seq = table.c.checkpoint_seq + 1
    statement = (
        update(table)
        .where(table.c.id == bindparam("b_id"))
        .values(
            checkpoint_seq=func.last_insert_id(seq) if form == "last_insert_id" else seq,
            latest_checkpoint_ref=bindparam("b_ref"),
            updated_at=bindparam("b_now", type_=table.c.updated_at.type),
        )
    )
    return statement.returning(table.c.checkpoint_seq) if form == "returning" else statement


_CHECKPOINT_SEQ = {form: _checkpoint_seq_statement(form) for form in get_args(CounterForm)}
_SESSION_TABLE = cast(Table, AgentSession.__table__)
_CHECKPOINT_COUNT = select(_SESSION_TABLE.c.checkpoint_seq).where(
    _SESSION_TABLE.c.id == bindparam("b_id")
)


def allocate_checkpoint_seq(
    session: Session,
    id: str,
    ref: str,
    now: datetime,
    *,
    condition: ColumnElement[bool] | None = None,
) -> int | None:
    """Take the next checkpoint seq of session ``id`` and make ``ref`` its latest
    checkpoint, when ``condition`` (a compare-and-set on the row) holds.

    One UPDATE under the session row's lock, so the seq and the pointer move together
    and two savers from one parent cannot both match; the revision is left alone
    (checkpoints never conflict with a save). Returns the seq taken, or None when no
    row matched (no such session, or ``condition`` was false). Without a condition the
    statement is built once.

    PostgreSQL and SQLite read the new counter back with ``UPDATE ... RETURNING``;
    MariaDB/MySQL, which have no UPDATE RETURNING, through ``LAST_INSERT_ID(expr)``
    (see ``allocate_step_seqs``); on the portable profile, read from the locked row.
    """
    connection = session.connection()
    form = counter_form(capabilities(connection.dialect))
    statement = _CHECKPOINT_SEQ[form]
    if condition is not None:
        statement = statement.where(condition)
    params = {"b_id": id, "b_ref": ref, "b_now": now}
    result = connection.execute(statement, params)
    return counter_after_update(connection, result, form, _CHECKPOINT_COUNT, params)


_CHECKPOINT_SESSION_INDEX = "uq_agentledger_checkpoints_session_id_seq"
_HINTED = dialect_names(lambda found: found.index_hints)


S = TypeVar("S", bound=Select[Any])


def on_checkpoint_session_index(query: S) -> S:
    """``query`` (over one session's checkpoints) pinned to the (session_id, seq) index.

    MariaDB/MySQL only (the hint renders nowhere else): on a small or skewed table
    their optimizer may scan the whole table instead, and a locking read (or a locking
    subquery) that scans under REPEATABLE READ locks every session's rows, so
    unrelated writers wait or deadlock.
    """
    table = cast(Table, AgentCheckpoint.__table__)
    hint = f"FORCE INDEX ({_CHECKPOINT_SESSION_INDEX})"
    for hinted in _HINTED:
        query = query.with_hint(table, hint, hinted)
    return query


_EARLIER = _CHECKPOINTS.alias("earlier")
_NEWEST_BELOW = on_checkpoint_session_index(
    locking(
        select(_CHECKPOINTS.c.ref).where(
            _CHECKPOINTS.c.session_id == bindparam("id"),
            _CHECKPOINTS.c.seq
            == select(func.max(_EARLIER.c.seq))
            .where(_EARLIER.c.session_id == bindparam("id"), _EARLIER.c.seq < bindparam("seq"))
            .scalar_subquery(),
        ),
        read=True,
    )
)
"""The newest checkpoint of session ``id`` below ``seq``, share-locked: found by its
key, the highest seq below, rather than as the first row of a descending page, since
Oracle refuses a locking read with a row limit (ORA-02014)."""


def _alive(now: datetime) -> ColumnElement[bool]:
    """Checkpoints that have not expired at ``now``."""
    return or_(_CHECKPOINTS.c.expires_at.is_(None), _CHECKPOINTS.c.expires_at > now)


def _expired(now: datetime) -> ColumnElement[bool]:
    return _CHECKPOINTS.c.expires_at <= now


def _is_alive(expires_at: datetime | None, now: datetime) -> bool:
    return expires_at is None or expires_at > now


def _not_found(ref: str) -> NotFoundError:
    return NotFoundError(
        f"no checkpoint {ref!r} (never saved, deleted or expired)", entity="checkpoint", id=ref
    )


def _no_session(id: str, doing: str) -> NotFoundError:
    return NotFoundError(f"no session {id!r}: {doing}", id=id)


class CheckpointRepository(Repository):
    """The single implementation of the checkpoint operations."""

    @staticmethod
    def _expiry(ttl: object, now: datetime) -> datetime | None:
        if ttl is None:
            return None
        if not isinstance(ttl, timedelta):
            raise ValidationError(
                f"ttl must be a datetime.timedelta (or None), got {type(ttl).__name__}", path="ttl"
            )
        if ttl <= timedelta(0):
            raise ValidationError(f"ttl must be positive, got {ttl}", path="ttl")
        try:
            return now + ttl
        except OverflowError:
            raise ValidationError(f"ttl {ttl} reaches past year 9999", path="ttl") from None

    def _lock_session(self, id: str, doing: str) -> str | None:
        """Lock session ``id``'s row; its latest-checkpoint pointer. NotFoundError when
        the session is not there."""
        row = self._session.connection().execute(_LOCK_POINTER, {"id": id}).first()
        if row is None:
            raise _no_session(id, doing)
        return cast(str | None, row[0])

    def _row_of(self, ref: str, *, exclusive: bool = False) -> _Located | None:
        """(session_id, seq, expires_at) of checkpoint ``ref``, fresh, with a lock on that
        one row: a primary-key lookup, so no range and no other session's rows."""
        statement = _LOCATE_LOCKED[exclusive]
        return self._session.connection().execute(statement, {"ref": ref}).first()

    def _newest_alive(self, id: str, now: datetime, *, below: int | None) -> str | None:
        """The newest unexpired checkpoint of session ``id`` (under seq ``below``).

        A plain read: it only names a lineage or explains a conflict, never decides one.
        """
        query = select(_CHECKPOINTS.c.ref).where(_CHECKPOINTS.c.session_id == id, _alive(now))
        if below is not None:
            query = query.where(_CHECKPOINTS.c.seq < below)
        query = query.order_by(_CHECKPOINTS.c.seq.desc()).limit(1)
        return cast(str | None, self._session.execute(query).scalar())

    def _current_latest(self, id: str, pointer: str | None, now: datetime) -> str | None:
        """What ``latest`` answers at ``now``, given the session's (locked) pointer."""
        if pointer is None:
            return None
        top = self._row_of(pointer)
        if top is not None and _is_alive(top.expires_at, now):
            return pointer
        return self._newest_alive(id, now, below=top.seq if top is not None else None)

    def _insert(
        self,
        id: str,
        ref: str,
        seq: int,
        parent: str | None,
        now: datetime,
        expires_at: datetime | None,
        payload: CheckpointPayload,
        text: str,
    ) -> Checkpoint:
        size = len(text.encode("utf-8"))
        values: dict[str, Any] = {
            "ref": ref,
            "session_id": id,
            "seq": seq,
            "parent_ref": parent,
            "created_at": now,
            "expires_at": expires_at,
            "size": size,
        }
        connection = self._session.connection()
        statement = insert_json_text(connection, _CHECKPOINTS, "payload")
        connection.execute(statement, {**values, "b_payload": text})
        values.pop("size")
        return Checkpoint(payload=payload, **values)

    @operation(writes=True)
    def save(
        self,
        id: str,
        payload: CheckpointPayload | dict[str, Any],
        *,
        parent: str | None = None,
        ttl: timedelta | None = None,
    ) -> Checkpoint:
        """Store a checkpoint and make it the session's latest.

        Without ``parent``, the new checkpoint continues from the session's latest (its
        ``parent_ref``; None for the first). With ``parent``, it is a compare-and-set:
        it is stored only if ``parent`` is what ``latest`` answers right now, so of two
        runs resuming from one pause exactly one succeeds. With ``ttl`` (a positive
        timedelta), it expires that long after now.

        Raises:
            ConflictError: reason ``parent`` when ``parent`` is not the session's latest
                checkpoint (another run resumed first, or it expired or was deleted);
                nothing is stored.
            NotFoundError: no such session (never created, or deleted); nothing is stored.
            InvalidIdError: a malformed session id or parent ref.
            ValidationError: a payload that is not JSON or is over
                ``Limits.max_checkpoint_bytes`` (named by its path), or a bad ttl.
        """
        validate_id(id)
        if parent is not None:
            checked_ref(parent, what="parent ref")
        checked, text = payload_text(payload, self._work.settings.limits)
        now = self._work.settings.now()
        expires_at = self._expiry(ttl, now)
        ref = new_id(now)
        doing = "the checkpoint is not stored"
        if parent is None:
            lineage = self._current_latest(id, self._lock_session(id, doing), now)
            seq = allocate_checkpoint_seq(self._session, id, ref, now)
        else:
            lineage = parent
            # Correlated with the session row, so it is read after that row is locked:
            # the lock order of every checkpoint writer (session row, then checkpoints).
            parent_alive = (
                select(_CHECKPOINTS.c.ref)
                .where(_CHECKPOINTS.c.ref == _SESSIONS.c.latest_checkpoint_ref, _alive(now))
                .correlate(_SESSIONS)
                .exists()
            )
            condition = and_(_SESSIONS.c.latest_checkpoint_ref == parent, parent_alive)
            seq = allocate_checkpoint_seq(self._session, id, ref, now, condition=condition)
            if seq is None:
                self._check_parent(id, parent, now, doing)
                seq = allocate_checkpoint_seq(self._session, id, ref, now)
        if seq is None:  # pragma: no cover - the row is locked, so it is still there
            raise _no_session(id, doing)
        return self._insert(id, ref, seq, lineage, now, expires_at, checked, text)

    def _check_parent(self, id: str, parent: str, now: datetime, doing: str) -> None:
        """After a failed compare-and-set, under the session row's lock: NotFoundError
        without a session, else ConflictError unless ``parent`` is still what ``latest``
        answers (the pointer names an expired checkpoint and everything between it and
        ``parent`` expired too, or the UPDATE's subquery read an older snapshot)."""
        pointer = self._lock_session(id, doing)
        top = self._row_of(pointer) if pointer is not None else None
        source = top if pointer == parent else self._row_of(parent)
        latest = (
            source is not None
            and source.session_id == id
            and _is_alive(source.expires_at, now)
            and (pointer == parent or self._only_expired_above(id, source.seq, top, now))
        )
        if not latest:
            current = self._current_latest(id, pointer, now)
            raise ConflictError(
                f"checkpoint {parent!r} is not the latest of session {id!r} "
                f"(the latest is {current!r}): another run resumed from it first, or it "
                "expired or was deleted; nothing was stored",
                reason="parent",
                id=id,
                expected=parent,
                actual=current,
            )

    def _only_expired_above(self, id: str, seq: int, top: _Located | None, now: datetime) -> bool:
        """Whether every checkpoint of session ``id`` after ``seq`` (up to and with the
        newest, ``top``) has expired. The range ends on ``top``, a row of this session,
        so the locking read locks only this session's rows."""
        if top is None or top.seq <= seq or _is_alive(top.expires_at, now):
            return False
        query = on_checkpoint_session_index(
            locking(
                select(_CHECKPOINTS.c.expires_at)
                .where(
                    _CHECKPOINTS.c.session_id == id,
                    _CHECKPOINTS.c.seq > seq,
                    _CHECKPOINTS.c.seq < top.seq,
                )
                .order_by(_CHECKPOINTS.c.seq),
                read=True,
            )
        )
        return not any(_is_alive(row[0], now) for row in self._session.execute(query))

    @operation(writes=True)
    def fork(
        self,
        id: str,
        from_ref: str,
        payload: CheckpointPayload | dict[str, Any],
        *,
        ttl: timedelta | None = None,
    ) -> Checkpoint:
        """Start a branch on purpose: store a checkpoint continuing from ``from_ref`` (an
        older checkpoint of the session, say) and make it the session's latest.

        Raises:
            NotFoundError: no such session, or ``from_ref`` is not an unexpired
                checkpoint of this session; nothing is stored.
            InvalidIdError: a malformed session id or ref.
            ValidationError: a payload that cannot be stored, or a bad ttl.
        """
        validate_id(id)
        checked_ref(from_ref, what="from_ref")
        checked, text = payload_text(payload, self._work.settings.limits)
        now = self._work.settings.now()
        expires_at = self._expiry(ttl, now)
        self._lock_session(id, "the fork is not stored")
        row = self._row_of(from_ref)
        if row is None or row.session_id != id or not _is_alive(row.expires_at, now):
            raise NotFoundError(
                f"no checkpoint {from_ref!r} in session {id!r} to fork from "
                "(never saved there, deleted or expired)",
                entity="checkpoint",
                id=from_ref,
            )
        ref = new_id(now)
        seq = allocate_checkpoint_seq(self._session, id, ref, now)
        if seq is None:  # pragma: no cover - the row is locked, so it is still there
            raise _no_session(id, "the fork is not stored")
        return self._insert(id, ref, seq, from_ref, now, expires_at, checked, text)

    @operation(writes=False)
    def latest(self, id: str) -> Checkpoint | None:
        """The session's newest unexpired checkpoint (by seq), or None when it has none.

        One indexed query, as fast with thousands of checkpoints as with one.

        Raises:
            NotFoundError: no such session.
            CorruptRecordError: the newest checkpoint's payload does not decode (it is
                never skipped in favour of an older one).
        """
        validate_id(id)
        now = self._work.settings.now()
        row = self._session.connection().execute(_LATEST, {"id": id, "now": now}).first()
        if row is not None:
            return checkpoint_of(row)
        if not session_exists(self._session, id):
            raise _no_session(id, "it has no checkpoints")
        return None

    @operation(writes=False)
    def get(self, ref: str) -> Checkpoint:
        """The checkpoint ``ref``.

        Raises:
            NotFoundError: no such checkpoint, or it expired.
            InvalidIdError: ``ref`` cannot be a checkpoint ref.
            CorruptRecordError: its payload does not decode.
        """
        checked_ref(ref)
        now = self._work.settings.now()
        row = self._session.connection().execute(_GET, {"ref": ref, "now": now}).first()
        if row is None:
            raise _not_found(ref)
        return checkpoint_of(row)

    @operation(writes=False)
    def list(self, id: str, *, limit: int = 50, cursor: str | None = None) -> Page[CheckpointInfo]:
        """The session's unexpired checkpoints, newest first, without payloads, one page
        at a time: pass ``next_cursor`` back for the next.

        Raises:
            NotFoundError: no such session.
            ValidationError: a bad limit, or a cursor that was tampered with or comes
                from another session's listing.
        """
        validate_id(id)
        bounded_int(limit, "limit", low=1, high=MAX_PAGE_SIZE)
        now = self._work.settings.now()
        query = _LIST.where(_CHECKPOINTS.c.session_id == id, _alive(now))
        if cursor is not None:
            query = query.where(_CHECKPOINTS.c.seq < _decode_cursor(cursor, id))
        query = query.order_by(_CHECKPOINTS.c.seq.desc()).limit(limit + 1)
        rows = self._session.execute(query).all()
        if not rows and not session_exists(self._session, id):
            raise _no_session(id, "it has no checkpoints")
        items = [CheckpointInfo.model_validate(dict(row._mapping)) for row in rows[:limit]]
        next_cursor = _encode_cursor(items[-1].seq, id) if len(rows) > limit else None
        return Page[CheckpointInfo](items=items, next_cursor=next_cursor)

    def _set_pointer(self, id: str, ref: str | None) -> None:
        statement = update(_SESSIONS).where(_SESSIONS.c.id == id)
        self._session.execute(statement.values(latest_checkpoint_ref=ref))

    def _repoint(self, ids: Sequence[str], removed: Sequence[str]) -> None:
        """Point each session of ``ids`` whose pointer is one of ``removed`` at its
        highest-seq remaining checkpoint, or NULL."""
        newest = on_checkpoint_session_index(
            select(_CHECKPOINTS.c.ref)
            .where(_CHECKPOINTS.c.session_id == _SESSIONS.c.id)
            .order_by(_CHECKPOINTS.c.seq.desc())
            .limit(1)
            .correlate(_SESSIONS)
        ).scalar_subquery()
        statement = update(_SESSIONS).where(
            _SESSIONS.c.id.in_(ids), _SESSIONS.c.latest_checkpoint_ref.in_(removed)
        )
        self._session.execute(statement.values(latest_checkpoint_ref=newest))

    @operation(writes=True)
    def delete(self, ref: str) -> None:
        """Delete the checkpoint ``ref`` (expired or not); when it was the session's
        newest, the session's latest pointer moves to the newest remaining one.

        Raises:
            NotFoundError: no such checkpoint.
            InvalidIdError: ``ref`` cannot be a checkpoint ref.
        """
        checked_ref(ref)
        query = select(_CHECKPOINTS.c.session_id).where(_CHECKPOINTS.c.ref == ref)
        id = self._session.execute(query).scalar()
        if id is None:  # a plain read may answer from an older snapshot: ask for the latest
            found = self._row_of(ref)
            if found is None:
                raise _not_found(ref)
            id = found.session_id
        try:
            pointer = self._lock_session(id, "the checkpoint went with it")
        except NotFoundError:
            raise _not_found(ref) from None
        row = self._row_of(ref, exclusive=True)
        if row is None or row.session_id != id:
            raise _not_found(ref)
        self._delete_refs([ref])
        if pointer == ref:
            below = {"id": id, "seq": row.seq}
            self._set_pointer(id, self._session.execute(_NEWEST_BELOW, below).scalar())

    @operation(writes=True)
    def delete_all(self, id: str) -> int:
        """Delete every checkpoint of the session; returns how many there were. The seq
        counter is kept: a later checkpoint continues after the highest ever issued.

        Raises:
            NotFoundError: no such session.
        """
        validate_id(id)
        pointer = self._lock_session(id, "no checkpoints to delete")
        count = self._delete_refs([info.ref for info in self._history(id, pointer, lock=True)])
        if pointer is not None:
            self._set_pointer(id, None)
        return count

    def _history(self, id: str, pointer: str | None, *, lock: bool) -> CheckpointInfos:
        """Every checkpoint of session ``id``, newest first; ``pointer`` is its newest
        (read under the session row's lock when ``lock``, and then every row is locked
        for deletion too).

        The locking range read ends on the pointer's row, ascending, so on MariaDB it
        locks only this session's rows (and the gap before its first); callers then
        delete by primary key rather than with a DELETE by session, which could lock
        the rows around the range (or, planned as a scan, every row).
        """
        if pointer is None:
            return []
        query = on_checkpoint_session_index(_LIST.where(_CHECKPOINTS.c.session_id == id))
        if lock:
            top = self._row_of(pointer, exclusive=True)
            if top is not None:
                query = query.where(_CHECKPOINTS.c.seq <= top.seq)
        rows = self._session.execute(locking(query.order_by(_CHECKPOINTS.c.seq)) if lock else query)
        history = [CheckpointInfo.model_validate(dict(row._mapping)) for row in rows]
        return sorted(history, key=lambda info: info.seq, reverse=True)

    def _prune_one(
        self, id: str, pointer: str | None, keep_last: int, now: datetime, *, apply: bool
    ) -> CheckpointInfos:
        """The rule of ``prune``: keep the newest ``keep_last`` unexpired checkpoints, the
        rest go (older ones, and every expired one). Applied under the session's lock,
        the pointer moves to the newest kept; otherwise only listed."""
        kept: CheckpointInfos = []
        doomed: CheckpointInfos = []
        for info in self._history(id, pointer, lock=apply):
            if len(kept) < keep_last and _is_alive(info.expires_at, now):
                kept.append(info)
            else:
                doomed.append(info)
        if apply:
            self._delete_refs([info.ref for info in doomed])
            newest = kept[0].ref if kept else None
            if newest != pointer:
                self._set_pointer(id, newest)
        return doomed

    @operation(writes=True)
    def prune(self, id: str, keep_last: int) -> int:
        """Keep the session's newest ``keep_last`` unexpired checkpoints and delete the
        rest (older ones, and any expired ones); returns how many went.

        Raises:
            NotFoundError: no such session.
            ValidationError: ``keep_last`` is not an int >= 0.
        """
        validate_id(id)
        bounded_int(keep_last, "keep_last")
        now = self._work.settings.now()
        pointer = self._lock_session(id, "no checkpoints to prune")
        return len(self._prune_one(id, pointer, keep_last, now, apply=True))

    @operation(writes=False)
    def prunable(
        self, ids: Sequence[str], keep_last: int, *, at: datetime | None = None
    ) -> CheckpointInfos:
        """What ``prune(id, keep_last)`` would delete at ``at`` (default now) from each
        session of ``ids``, newest first per session; nothing changes (a plan)."""
        bounded_int(keep_last, "keep_last")
        now = self._moment(at)
        pointers = select(_SESSIONS.c.id, _SESSIONS.c.latest_checkpoint_ref).where(
            _SESSIONS.c.id.in_(sorted(set(map(validate_id, ids))))
        )
        found: CheckpointInfos = []
        for id, pointer in self._session.execute(pointers.order_by(_SESSIONS.c.id)):
            found += self._prune_one(id, pointer, keep_last, now, apply=False)
        return found

    @operation(writes=True)
    def prune_sessions(
        self, ids: Sequence[str], keep_last: int, *, at: datetime | None = None
    ) -> CheckpointInfos:
        """``prune(id, keep_last)`` for every session of ``ids`` that exists, in one
        transaction, judged at ``at`` (default now); returns what went."""
        bounded_int(keep_last, "keep_last")
        now = self._moment(at)
        locked = select(_SESSIONS.c.id, _SESSIONS.c.latest_checkpoint_ref).where(
            _SESSIONS.c.id.in_(sorted(set(map(validate_id, ids))))
        )
        rows = self._session.execute(locking(locked.order_by(_SESSIONS.c.id))).all()
        gone: CheckpointInfos = []
        for id, pointer in rows:
            gone += self._prune_one(id, pointer, keep_last, now, apply=True)
        return gone

    def _moment(self, at: datetime | None) -> datetime:
        return self._work.settings.now() if at is None else utc(at, field="at")

    def _delete_refs(self, refs: Sequence[str], *also: ColumnElement[bool]) -> int:
        """Delete the checkpoints ``refs`` (that also match ``also``), by primary key."""
        count = 0
        for start in range(0, len(refs), _DELETE_CHUNK):
            chunk = refs[start : start + _DELETE_CHUNK]
            statement = delete(_CHECKPOINTS).where(_CHECKPOINTS.c.ref.in_(chunk), *also)
            count += int(self._session.execute(statement).rowcount)  # type: ignore[attr-defined]
        return count

    @operation(writes=False)
    def expired(
        self,
        selection: SessionSelection,
        *,
        at: datetime | None = None,
        after: tuple[datetime, str] | None = None,
        limit: int = PURGE_BATCH,
    ) -> CheckpointInfos:
        """Up to ``limit`` checkpoints expired at ``at`` (default now) of the sessions of
        ``selection``, by (expires_at, ref) after the position ``after``."""
        bounded_int(limit, "limit", low=1, high=MAX_PURGE_BATCH)
        query = _LIST.where(_expired(self._moment(at)))
        conditions = selected(selection)
        if conditions:
            query = query.join(_SESSIONS, _SESSIONS.c.id == _CHECKPOINTS.c.session_id).where(
                *conditions
            )
        order = (_CHECKPOINTS.c.expires_at, _CHECKPOINTS.c.ref)
        if after is not None:
            query = query.where(after_keyset(order, after))
        rows = self._session.execute(query.order_by(*order).limit(limit)).all()
        return [CheckpointInfo.model_validate(dict(row._mapping)) for row in rows]

    @operation(writes=True)
    def delete_expired(self, refs: Sequence[str], *, at: datetime | None = None) -> CheckpointInfos:
        """Delete the checkpoints of ``refs`` that are still expired at ``at`` (default
        now), judged under their sessions' locks; sessions whose newest checkpoint went
        point at their newest remaining one. Returns what went."""
        now = self._moment(at)
        wanted = [checked_ref(ref) for ref in refs]
        owners = select(_CHECKPOINTS.c.session_id).where(_CHECKPOINTS.c.ref.in_(wanted))
        ids = lock_sessions(self._session, list(self._session.execute(owners).scalars()))
        if not ids:
            return []
        still = locking(_LIST.where(_CHECKPOINTS.c.ref.in_(wanted), _expired(now)))
        gone = [
            CheckpointInfo.model_validate(dict(row._mapping))
            for row in self._session.execute(still)
        ]
        self._delete_refs([info.ref for info in gone])
        self._repoint(ids, [info.ref for info in gone])
        return gone

    @operation(writes=True)
    def _purge_batch(self, now: datetime | None, batch: int) -> tuple[int, int, datetime]:
        """One batch of ``purge_expired``: (seen, deleted, the moment it judged by)."""
        moment = self._moment(now)
        seen = self.expired(SessionSelection(), at=moment, limit=batch)
        gone = self.delete_expired([info.ref for info in seen], at=moment) if seen else []
        return len(seen), len(gone), moment

    def purge_expired(self, *, batch: int = PURGE_BATCH) -> int:
        """Delete every expired checkpoint of every session, ``batch`` at a time;
        returns how many went. On a ledger each batch is a transaction of its own, so no
        lock is held for long; in a unit of work, all batches run in its transaction.
        Sessions whose newest checkpoint went point at their newest remaining one.

        Raises:
            ValidationError: ``batch`` is not an int from 1 to 10,000.
        """
        bounded_int(batch, "batch", low=1, high=MAX_PURGE_BATCH)
        now: datetime | None = None
        total = 0
        while True:
            seen, deleted, now = self._purge_batch(now, batch)
            total += deleted
            if seen < batch or deleted == 0:
                return total


def _encode_cursor(seq: int, id: str) -> str:
    """An opaque keyset position (the last seq shown), bound to session ``id``."""
    return encode_cursor([seq], ["checkpoints", id])


def _decode_cursor(cursor: object, id: str) -> int:
    """The seq of a cursor from ``_encode_cursor`` for the same session; anything else
    (tampered, truncated, another session's) is a ValidationError."""
    position = decode_cursor(cursor, ["checkpoints", id], what="the same session's listing")
    if len(position) != 1:
        raise ValidationError("invalid cursor: pass back next_cursor unchanged", path="cursor")
    try:
        return bounded_int(position[0], "cursor", low=1)
    except ValidationError:
        raise ValidationError(
            "invalid cursor: pass back the next_cursor of the same session's listing, unchanged",
            path="cursor",
        ) from None
