"""Retention: delete what is past keeping, and (on SQLite) give the space back.

A policy has up to three rules, applied in this order, each in batches of their own
transactions, so no lock is held for long:

1. ``older_than``: sessions not updated for that long go, with all their rows.
2. ``keep_checkpoints=K``: in each remaining session, the newest K unexpired
   checkpoints stay; older ones and expired ones go (the rule of
   ``checkpoints.prune``).
3. ``expired_checkpoints``: expired checkpoints go (implied by rule 2 when given).

``app_name`` and ``user_id`` limit every rule to those sessions. ``plan_purge``
lists exactly what ``purge`` would delete at that moment and changes nothing;
``purge`` deletes it, re-checking each row under its session's lock, and lists what
went. Both stream the items to ``on_item`` and return the totals.

SQLite keeps freed pages inside the file; ``vacuum`` gives them back to the file
system. PostgreSQL and MariaDB reuse the space on their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, cast

from sqlalchemy import ColumnElement, Row, Table, and_, delete, func, not_, or_, select

from ._checks import scope_value
from ._dialects import sqlite_sizes, sqlite_vacuum
from ._stores import Store, open_async_store, open_store, run_in_greenlet
from ._translate import translated
from .errors import ValidationError
from .models import AgentCheckpoint, AgentSession
from .records import Record
from .repositories._base import Work
from .repositories.checkpoints import CheckpointRepository

if TYPE_CHECKING:
    from .ledger import AsyncLedger, Ledger

_SESSIONS = cast(Table, AgentSession.__table__)
_CHECKPOINTS = cast(Table, AgentCheckpoint.__table__)
DEFAULT_BATCH = 500
MAX_BATCH = 10_000
_PAGE_CHECKPOINTS = 10_000
"""Sessions are taken in pages of at most this many checkpoints (estimated from their
counters); a session with more is a page of its own."""

Reason = Literal["older_than", "expired", "beyond_keep"]


class PurgeItem(Record):
    """One thing a purge deletes: a session (with all its rows) or a checkpoint."""

    kind: Literal["session", "checkpoint"]
    id: str
    """The session's id, or the checkpoint's ref."""
    session_id: str
    reason: Reason
    """``older_than`` (a session not updated since the cutoff), ``expired`` (a
    checkpoint past its expiry) or ``beyond_keep`` (older than the newest K)."""
    at: datetime
    """When the session was last updated, or when the checkpoint was saved."""
    title: str | None = None
    """The session's title, or its opening user message."""
    messages: int = 0
    steps: int = 0
    seq: int | None = None
    """The checkpoint's seq in its session."""
    expires_at: datetime | None = None
    size: int | None = None
    """The checkpoint payload's size in bytes."""


class PurgeReport(Record):
    """The totals of a purge (``applied``) or of its plan (nothing changed)."""

    applied: bool
    now: datetime
    """The moment the rules were evaluated at."""
    cutoff: datetime | None
    """Sessions updated before this go (``now - older_than``)."""
    sessions: int
    checkpoints: int
    """Checkpoints deleted by the checkpoint rules (those of deleted sessions not counted)."""
    messages: int
    """Messages of the deleted sessions."""
    steps: int
    """Steps of the deleted sessions."""
    sqlite_free_bytes: int | None = None
    """SQLite, after a purge: bytes of free pages inside the file, which ``vacuum``
    gives back to the file system; None elsewhere and for a plan."""


class VacuumReport(Record):
    """A SQLite file's size before and after VACUUM, in bytes."""

    before: int
    after: int


ItemCallback = Callable[[PurgeItem], None]


@dataclass(frozen=True)
class _Policy:
    older_than: timedelta | None
    expired_checkpoints: bool
    keep_checkpoints: int | None
    app_name: str | None
    user_id: str | None

    @classmethod
    def of(
        cls,
        older_than: timedelta | None,
        expired_checkpoints: bool,
        keep_checkpoints: int | None,
        app_name: str | None,
        user_id: str | None,
    ) -> _Policy:
        if older_than is not None and (
            not isinstance(older_than, timedelta) or older_than <= timedelta(0)
        ):
            raise ValidationError(
                f"older_than must be a positive timedelta, got {older_than!r}", path="older_than"
            )
        if keep_checkpoints is not None and (
            not isinstance(keep_checkpoints, int)
            or isinstance(keep_checkpoints, bool)
            or keep_checkpoints < 0
        ):
            raise ValidationError(
                f"keep_checkpoints must be an int >= 0, got {keep_checkpoints!r}",
                path="keep_checkpoints",
            )
        if not isinstance(expired_checkpoints, bool):
            raise ValidationError("expired_checkpoints must be True or False")
        if older_than is None and keep_checkpoints is None and not expired_checkpoints:
            raise ValidationError(
                "nothing to purge: give older_than, expired_checkpoints or keep_checkpoints"
            )
        return cls(
            older_than=older_than,
            expired_checkpoints=expired_checkpoints,
            keep_checkpoints=keep_checkpoints,
            app_name=scope_value(app_name, field="app_name"),
            user_id=scope_value(user_id, field="user_id"),
        )


@dataclass
class _Tally:
    sessions: int = 0
    checkpoints: int = 0
    messages: int = 0
    steps: int = 0


class _Purge:
    """One evaluation of a policy: listing only (a plan) or deleting as it lists."""

    def __init__(
        self,
        store: Store,
        policy: _Policy,
        *,
        apply: bool,
        batch: int,
        on_item: ItemCallback | None,
    ) -> None:
        self._store = store
        self._policy = policy
        self._apply = apply
        self._batch = batch
        self._on_item = on_item
        self.now = store.settings.now()
        self.cutoff = self.now - policy.older_than if policy.older_than is not None else None
        self.tally = _Tally()

    def run(self) -> PurgeReport:
        if self.cutoff is not None:
            self._old_sessions(self.cutoff)
        if self._policy.keep_checkpoints is not None:
            self._surplus_checkpoints(self._policy.keep_checkpoints)
        elif self._policy.expired_checkpoints:
            self._expired_checkpoints()
        return PurgeReport(
            applied=self._apply,
            now=self.now,
            cutoff=self.cutoff,
            sqlite_free_bytes=self._free_bytes() if self._apply else None,
            **vars(self.tally),
        )

    # -- helpers --------------------------------------------------------------------------

    def _rows(self, work: Work, query: Any) -> list[Row[Any]]:
        with translated(self._store.url):
            return list(work.session.execute(query).all())

    def _emit(self, item: PurgeItem) -> None:
        if self._on_item is not None:
            self._on_item(item)

    def _scope(self) -> list[ColumnElement[bool]]:
        """Sessions the policy covers; for the checkpoint rules, minus those rule 1
        takes (a plan must not list a checkpoint of a session it also lists)."""
        found: list[ColumnElement[bool]] = []
        if self._policy.app_name is not None:
            found.append(_SESSIONS.c.app_name == self._policy.app_name)
        if self._policy.user_id is not None:
            found.append(_SESSIONS.c.user_id == self._policy.user_id)
        return found

    def _survivors(self) -> list[ColumnElement[bool]]:
        if self.cutoff is None:
            return self._scope()
        return [*self._scope(), not_(_SESSIONS.c.updated_at < self.cutoff)]

    def _lock_sessions(self, work: Work, ids: Sequence[str]) -> None:
        """Lock session rows in id order: the order every checkpoint writer locks in."""
        if self._apply and ids:
            query = select(_SESSIONS.c.id).where(_SESSIONS.c.id.in_(ids)).order_by(_SESSIONS.c.id)
            self._rows(work, query.with_for_update())

    # -- rule 1: sessions not updated since the cutoff --------------------------------------

    def _old_sessions(self, cutoff: datetime) -> None:
        s = _SESSIONS.c
        base = (
            select(s.id, s.title, s.preview, s.updated_at, s.message_count, s.step_count)
            .where(s.updated_at < cutoff, *self._scope())
            .order_by(s.updated_at, s.id)
            .limit(self._batch)
        )
        position: tuple[datetime, str] | None = None
        while True:
            query = base if position is None else base.where(_after(s.updated_at, s.id, position))
            with self._store.transaction(writes=self._apply) as work:
                rows = self._rows(work, query)
                doomed = self._delete_sessions(work, rows, cutoff) if self._apply else rows
            for row in doomed:
                self._count_session(row)
            if len(rows) < self._batch:
                return
            position = (rows[-1].updated_at, rows[-1].id)

    def _delete_sessions(
        self, work: Work, rows: list[Row[Any]], cutoff: datetime
    ) -> list[Row[Any]]:
        """Delete the sessions of ``rows`` still not updated since the cutoff, under
        their row locks; returns those that went."""
        ids = [row.id for row in rows]
        if not ids:
            return []
        locked = select(_SESSIONS.c.id).where(
            _SESSIONS.c.id.in_(ids), _SESSIONS.c.updated_at < cutoff
        )
        still = {
            row.id for row in self._rows(work, locked.order_by(_SESSIONS.c.id).with_for_update())
        }
        if still:
            with translated(self._store.url):
                work.session.execute(delete(_SESSIONS).where(_SESSIONS.c.id.in_(still)))
        return [row for row in rows if row.id in still]

    def _count_session(self, row: Row[Any]) -> None:
        self.tally.sessions += 1
        self.tally.messages += row.message_count
        self.tally.steps += row.step_count
        self._emit(
            PurgeItem(
                kind="session",
                id=row.id,
                session_id=row.id,
                reason="older_than",
                at=row.updated_at,
                title=row.title or row.preview,
                messages=row.message_count,
                steps=row.step_count,
            )
        )

    # -- rule 2: keep the newest K unexpired checkpoints of each session --------------------

    def _surplus_checkpoints(self, keep: int) -> None:
        for ids in self._session_pages():
            with self._store.transaction(writes=self._apply) as work:
                self._lock_sessions(work, ids)
                doomed = self._doomed_condition(work, ids, keep)
                self._checkpoint_batches(work, doomed, keep)

    def _session_pages(self) -> Iterator[list[str]]:
        """Ids of the sessions with checkpoints the rules cover, in pages."""
        s = _SESSIONS.c
        base = (
            select(s.id, s.checkpoint_seq)
            .where(s.checkpoint_seq > 0, *self._survivors())
            .order_by(s.id)
            .limit(self._batch)
        )
        after: str | None = None
        while True:
            with self._store.transaction(writes=False) as work:
                rows = self._rows(work, base if after is None else base.where(s.id > after))
            page: list[str] = []
            estimate = 0
            for row in rows:
                if page and estimate + row.checkpoint_seq > _PAGE_CHECKPOINTS:
                    break
                page.append(row.id)
                estimate += row.checkpoint_seq
            if not page:
                return
            yield page
            if len(rows) < self._batch and len(page) == len(rows):
                return
            after = page[-1]

    def _doomed_condition(self, work: Work, ids: list[str], keep: int) -> ColumnElement[bool]:
        """Checkpoints of ``ids`` that go: expired ones, and unexpired ones older than
        the newest ``keep`` unexpired (all of them when ``keep`` is 0)."""
        c = _CHECKPOINTS.c
        mine = c.session_id.in_(ids)
        if keep == 0:
            return mine
        alive = or_(c.expires_at.is_(None), c.expires_at > self.now)
        rank = func.row_number().over(partition_by=c.session_id, order_by=c.seq.desc())
        ranked = select(c.session_id, c.seq, rank.label("rank")).where(mine, alive).subquery()
        cutoffs = self._rows(
            work, select(ranked.c.session_id, ranked.c.seq).where(ranked.c.rank == keep)
        )
        older = [and_(c.session_id == row.session_id, c.seq < row.seq) for row in cutoffs]
        return and_(mine, or_(c.expires_at <= self.now, *older))

    # -- rule 3: expired checkpoints ------------------------------------------------------------

    def _expired_checkpoints(self) -> None:
        c = _CHECKPOINTS.c
        base = (
            select(c.ref, c.session_id, c.seq, c.created_at, c.expires_at, c.size)
            .join(_SESSIONS, _SESSIONS.c.id == c.session_id)
            .where(c.expires_at <= self.now, *self._survivors())
            .order_by(c.expires_at, c.ref)
            .limit(self._batch)
        )
        position: tuple[datetime, str] | None = None
        while True:
            query = base if position is None else base.where(_after(c.expires_at, c.ref, position))
            with self._store.transaction(writes=self._apply) as work:
                rows = self._rows(work, query)
                if self._apply and rows:
                    self._lock_sessions(work, sorted({row.session_id for row in rows}))
                    refs = [row.ref for row in rows]
                    doomed = and_(c.ref.in_(refs), c.expires_at <= self.now)
                    self._checkpoint_batches(work, doomed, None)
                elif rows:
                    for row in rows:
                        self._count_checkpoint(row, "expired")
            if len(rows) < self._batch:
                return
            position = (rows[-1].expires_at, rows[-1].ref)

    # -- shared by rules 2 and 3 ----------------------------------------------------------------

    def _checkpoint_batches(
        self, work: Work, doomed: ColumnElement[bool], keep: int | None
    ) -> None:
        """List (and, applying, delete) the checkpoints matching ``doomed``, a batch at a
        time, inside ``work``; sessions whose newest checkpoint went are re-pointed."""
        c = _CHECKPOINTS.c
        base = (
            select(c.ref, c.session_id, c.seq, c.created_at, c.expires_at, c.size)
            .where(doomed)
            .order_by(c.session_id, c.seq)
            .limit(self._batch)
        )
        position: tuple[str, int] | None = None
        while True:
            query = base if position is None else base.where(_after(c.session_id, c.seq, position))
            rows = self._rows(work, query)
            for row in rows:
                expired = row.expires_at is not None and row.expires_at <= self.now
                self._count_checkpoint(row, "expired" if expired or keep is None else "beyond_keep")
            if self._apply and rows:
                refs = [row.ref for row in rows]
                with translated(self._store.url):
                    work.session.execute(delete(_CHECKPOINTS).where(c.ref.in_(refs)))
                    # The one implementation of the latest-checkpoint pointer rule.
                    CheckpointRepository(work)._repoint(sorted({r.session_id for r in rows}), refs)
            if len(rows) < self._batch:
                return
            position = (rows[-1].session_id, rows[-1].seq)

    def _count_checkpoint(self, row: Row[Any], reason: Reason) -> None:
        self.tally.checkpoints += 1
        self._emit(
            PurgeItem(
                kind="checkpoint",
                id=row.ref,
                session_id=row.session_id,
                reason=reason,
                at=row.created_at,
                seq=row.seq,
                expires_at=row.expires_at,
                size=row.size,
            )
        )

    def _free_bytes(self) -> int | None:
        with self._store.connection() as connection:
            sizes = sqlite_sizes(connection)
            if connection.in_transaction():
                connection.rollback()
        return None if sizes is None else sizes[1]


def _after(first: Any, second: Any, position: tuple[Any, Any]) -> ColumnElement[bool]:
    """Keyset condition: rows after ``position`` in (first, second) order."""
    return or_(first > position[0], and_(first == position[0], second > position[1]))


def _check_batch(batch: object) -> int:
    if not isinstance(batch, int) or isinstance(batch, bool) or not 1 <= batch <= MAX_BATCH:
        raise ValidationError(f"batch must be an int from 1 to {MAX_BATCH}", path="batch")
    return batch


def _run(
    store: Store, policy: _Policy, apply: bool, batch: int, on_item: ItemCallback | None
) -> PurgeReport:
    return _Purge(store, policy, apply=apply, batch=batch, on_item=on_item).run()


def _vacuum(store: Store) -> VacuumReport:
    with store.connection() as connection:
        before = sqlite_sizes(connection)
        if connection.in_transaction():
            connection.rollback()
        if before is None:
            raise ValidationError(
                f"VACUUM here is for SQLite files; {connection.dialect.name} reuses freed "
                "space on its own",
                path="vacuum",
            )
        sqlite_vacuum(connection)
        after = sqlite_sizes(connection)
        if connection.in_transaction():
            connection.rollback()
    assert after is not None
    return VacuumReport(before=before[0], after=after[0])


def _sizes(store: Store) -> tuple[int, int] | None:
    with store.connection() as connection:
        sizes = sqlite_sizes(connection)
        if connection.in_transaction():
            connection.rollback()
    return sizes


# --- the public functions ---------------------------------------------------------------------


def plan_purge(
    ledger: Ledger,
    *,
    older_than: timedelta | None = None,
    expired_checkpoints: bool = False,
    keep_checkpoints: int | None = None,
    app_name: str | None = None,
    user_id: str | None = None,
    batch: int = DEFAULT_BATCH,
    on_item: ItemCallback | None = None,
) -> PurgeReport:
    """What ``purge`` with the same rules would delete now, item by item to
    ``on_item``; changes nothing (a dry run).

    Raises:
        ValidationError: no rule given, or a bad one.
    """
    policy = _Policy.of(older_than, expired_checkpoints, keep_checkpoints, app_name, user_id)
    return _run(open_store(ledger), policy, False, _check_batch(batch), on_item)


def purge(
    ledger: Ledger,
    *,
    older_than: timedelta | None = None,
    expired_checkpoints: bool = False,
    keep_checkpoints: int | None = None,
    app_name: str | None = None,
    user_id: str | None = None,
    batch: int = DEFAULT_BATCH,
    on_item: ItemCallback | None = None,
) -> PurgeReport:
    """Delete what the rules select (see the module docstring), ``batch`` rows per
    transaction, each item to ``on_item`` as it goes. On SQLite the report says how much
    free space the file now holds (``vacuum`` gives it back).

    Raises:
        ValidationError: no rule given, or a bad one.
    """
    policy = _Policy.of(older_than, expired_checkpoints, keep_checkpoints, app_name, user_id)
    return _run(open_store(ledger), policy, True, _check_batch(batch), on_item)


def vacuum(ledger: Ledger) -> VacuumReport:
    """SQLite: rebuild the file without its free pages (needs the database's size again in
    free disk space, and waits for other writers).

    Raises:
        ValidationError: the database is not SQLite.
    """
    return _vacuum(open_store(ledger))


def sqlite_sizes_of(ledger: Ledger) -> tuple[int, int] | None:
    """SQLite: (file size, free bytes inside it); None on other databases."""
    return _sizes(open_store(ledger))


async def aplan_purge(
    ledger: AsyncLedger,
    *,
    older_than: timedelta | None = None,
    expired_checkpoints: bool = False,
    keep_checkpoints: int | None = None,
    app_name: str | None = None,
    user_id: str | None = None,
    batch: int = DEFAULT_BATCH,
    on_item: ItemCallback | None = None,
) -> PurgeReport:
    """``plan_purge`` for an AsyncLedger."""
    policy = _Policy.of(older_than, expired_checkpoints, keep_checkpoints, app_name, user_id)
    store = await open_async_store(ledger)
    return await run_in_greenlet(_run, store, policy, False, _check_batch(batch), on_item)


async def apurge(
    ledger: AsyncLedger,
    *,
    older_than: timedelta | None = None,
    expired_checkpoints: bool = False,
    keep_checkpoints: int | None = None,
    app_name: str | None = None,
    user_id: str | None = None,
    batch: int = DEFAULT_BATCH,
    on_item: ItemCallback | None = None,
) -> PurgeReport:
    """``purge`` for an AsyncLedger."""
    policy = _Policy.of(older_than, expired_checkpoints, keep_checkpoints, app_name, user_id)
    store = await open_async_store(ledger)
    return await run_in_greenlet(_run, store, policy, True, _check_batch(batch), on_item)


async def avacuum(ledger: AsyncLedger) -> VacuumReport:
    """``vacuum`` for an AsyncLedger."""
    store = await open_async_store(ledger)
    return await run_in_greenlet(_vacuum, store)


__all__ = [
    "PurgeItem",
    "PurgeReport",
    "VacuumReport",
    "aplan_purge",
    "apurge",
    "avacuum",
    "plan_purge",
    "purge",
    "sqlite_sizes_of",
    "vacuum",
]
