"""Retention: delete what is past keeping, and (on SQLite) give the space back.

A policy has up to four rules, applied in this order, each in batches of their own
transactions, so no lock is held for long:

1. ``older_than``: sessions not updated for that long go, with all their rows.
2. ``keep_checkpoints=K``: in each remaining session, the newest K unexpired
   checkpoints stay; older ones and expired ones go (the rule of
   ``checkpoints.prune``).
3. ``expired_checkpoints``: expired checkpoints go (implied by rule 2 when given).
4. ``expired_memories``: long-term memory items past their time to live go (what
   LangGraph's store sweeper runs).

``app_name`` and ``user_id`` limit the session and checkpoint rules to those sessions
(memory items belong to no session, so they cannot be combined with rule 4). ``plan_purge``
lists exactly what ``purge`` would delete at that moment and changes nothing;
``purge`` deletes it, re-checking each row under its session's lock, and lists what
went. Both stream the items to ``on_item`` and return the totals.

SQLite keeps freed pages inside the file; ``vacuum`` gives them back to the file
system. PostgreSQL and MariaDB reuse the space on their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy import Connection

from ._checks import bounded_int, scope_value
from ._concurrency import in_greenlet
from ._dialects import capabilities
from ._host import Host
from .errors import ValidationError
from .records import CheckpointInfo, Record, SessionSelection, SessionSummary
from .repositories.checkpoints import CheckpointRepository
from .repositories.memory import MemoryRepository, rebuild_words_index
from .repositories.sessions import SessionRepository

DEFAULT_BATCH = 500
MAX_BATCH = 10_000
_PAGE_CHECKPOINTS = 10_000
"""Sessions are taken in pages of at most this many checkpoints (estimated from their
counters); a session with more is a page of its own."""

Reason = Literal["older_than", "expired", "beyond_keep"]


def sqlite_sizes(connection: Connection) -> tuple[int, int] | None:
    """SQLite: (file size, free space inside it) in bytes; None on other databases.

    SQLite keeps the pages a delete frees inside the file for reuse; only VACUUM gives
    them back to the file system. PostgreSQL and MariaDB reuse freed space on their own.
    """
    if not capabilities(connection.dialect).single_file:
        return None
    page_size = int(connection.exec_driver_sql("PRAGMA page_size").scalar_one())
    pages = int(connection.exec_driver_sql("PRAGMA page_count").scalar_one())
    free = int(connection.exec_driver_sql("PRAGMA freelist_count").scalar_one())
    return pages * page_size, free * page_size


def sqlite_vacuum(connection: Connection) -> None:
    """SQLite: rebuild the file without its free pages, then truncate the WAL.

    VACUUM cannot run inside a transaction, and SQLAlchemy would begin one on the first
    statement, so it runs on the driver connection (whose own transaction handling is
    off, see engine/sqlite.py). It needs about the database's size again in free disk
    space.
    """
    driver_connection = connection.connection.dbapi_connection
    assert driver_connection is not None
    cursor = driver_connection.cursor()
    try:
        cursor.execute("VACUUM")
        rebuild_words_index(cursor)
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        cursor.close()


class PurgeItem(Record):
    """One thing a purge deletes: a session (with all its rows), a checkpoint, or a
    memory item."""

    kind: Literal["session", "checkpoint", "memory"]
    id: str
    """The session's id, the checkpoint's ref, or the memory item's key."""
    session_id: str | None
    """The session of a session or checkpoint; None for a memory item."""
    reason: Reason
    """``older_than`` (a session not updated since the cutoff), ``expired`` (a
    checkpoint or memory item past its expiry) or ``beyond_keep`` (older than the
    newest K)."""
    at: datetime
    """When the session was last updated, the checkpoint saved, or the memory item
    last written."""
    title: str | None = None
    """The session's title, or its opening user message."""
    messages: int = 0
    steps: int = 0
    seq: int | None = None
    """The checkpoint's seq in its session."""
    expires_at: datetime | None = None
    size: int | None = None
    """The checkpoint payload's size in bytes."""
    namespace: tuple[str, ...] | None = None
    """The memory item's namespace."""


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
    memories: int = 0
    """Memory items deleted by the ``expired_memories`` rule."""
    sqlite_free_bytes: int | None = None
    """SQLite, after a purge: bytes of free pages inside the file, which ``vacuum``
    gives back to the file system; None elsewhere and for a plan."""


class VacuumReport(Record):
    """A SQLite file's size before and after VACUUM, in bytes."""

    before: int
    after: int


ItemCallback = Callable[[PurgeItem], None]


@dataclass(frozen=True)
class PurgePolicy:
    """What a purge deletes: any of four rules, the first three limited to one app's or
    one user's sessions (see the module docstring). Checked when made (ValidationError naming the
    option), so a bad policy is refused before anything is read.

    Attributes:
        older_than: sessions not updated for this long go, with all their rows.
        expired_checkpoints: expired checkpoints go.
        keep_checkpoints: in each session, only the newest K unexpired checkpoints stay.
        expired_memories: long-term memory items past their time to live go.
        app_name: only this app's sessions.
        user_id: only this user's sessions.
    """

    older_than: timedelta | None = None
    expired_checkpoints: bool = False
    keep_checkpoints: int | None = None
    expired_memories: bool = False
    app_name: str | None = None
    user_id: str | None = None

    def __post_init__(self) -> None:
        older_than = self.older_than
        if older_than is not None and (
            not isinstance(older_than, timedelta) or older_than <= timedelta(0)
        ):
            raise ValidationError(
                f"older_than must be a positive timedelta, got {older_than!r}", path="older_than"
            )
        if self.keep_checkpoints is not None:
            bounded_int(self.keep_checkpoints, "keep_checkpoints")
        for flag in ("expired_checkpoints", "expired_memories"):
            if not isinstance(getattr(self, flag), bool):
                raise ValidationError(f"{flag} must be True or False", path=flag)
        if (
            older_than is None
            and self.keep_checkpoints is None
            and not self.expired_checkpoints
            and not self.expired_memories
        ):
            raise ValidationError(
                "nothing to purge: give older_than, expired_checkpoints, keep_checkpoints "
                "or expired_memories"
            )
        if self.expired_memories and (self.app_name is not None or self.user_id is not None):
            raise ValidationError(
                "expired_memories: memory items belong to no app or user session; purge "
                "them in a policy without app_name and user_id",
                path="expired_memories",
            )
        for name in ("app_name", "user_id"):
            value = getattr(self, name)
            if value is not None:
                scope_value(value, field=name)


@dataclass
class _Tally:
    sessions: int = 0
    checkpoints: int = 0
    messages: int = 0
    steps: int = 0
    memories: int = 0


class _Purge:
    """One evaluation of a policy: listing only (a plan) or deleting as it lists, each
    batch in a transaction of its own, through the repositories' bulk operations."""

    def __init__(
        self,
        ledger: Host,
        policy: PurgePolicy,
        *,
        apply: bool,
        batch: int,
        on_item: ItemCallback | None,
    ) -> None:
        self._ledger = ledger
        self._policy = policy
        self._apply = apply
        self._batch = batch
        self._on_item = on_item
        self.now = ledger.settings.now()
        self.cutoff = self.now - policy.older_than if policy.older_than is not None else None
        self.tally = _Tally()

    def run(self) -> PurgeReport:
        if self.cutoff is not None:
            self._old_sessions(self.cutoff)
        if self._policy.keep_checkpoints is not None:
            self._surplus_checkpoints(self._policy.keep_checkpoints)
        elif self._policy.expired_checkpoints:
            self._expired_checkpoints()
        if self._policy.expired_memories:
            self._expired_memories()
        return PurgeReport(
            applied=self._apply,
            now=self.now,
            cutoff=self.cutoff,
            sqlite_free_bytes=self._free_bytes() if self._apply else None,
            **vars(self.tally),
        )

    def _survivors(self) -> SessionSelection:
        """The sessions the checkpoint rules cover: in scope, minus those rule 1 takes (a
        plan must not list a checkpoint of a session it also lists)."""
        policy = self._policy
        return SessionSelection(
            app_name=policy.app_name, user_id=policy.user_id, updated_since=self.cutoff
        )

    def _emit(self, item: PurgeItem) -> None:
        if self._on_item is not None:
            self._on_item(item)

    # -- rule 1: sessions not updated since the cutoff --------------------------------------

    def _old_sessions(self, cutoff: datetime) -> None:
        policy = self._policy
        old = SessionSelection(
            app_name=policy.app_name, user_id=policy.user_id, updated_before=cutoff
        )
        position: tuple[datetime, str] | None = None
        while True:
            with self._ledger._transaction(writes=self._apply) as work:
                sessions = SessionRepository(work)
                rows = sessions.stale(old, after=position, limit=self._batch)
                if self._apply and rows:
                    gone = set(
                        sessions.delete_stale([row.id for row in rows], updated_before=cutoff)
                    )
                    doomed = [row for row in rows if row.id in gone]
                else:
                    doomed = rows
            for row in doomed:
                self._count_session(row)
            if len(rows) < self._batch:
                return
            position = (rows[-1].updated_at, rows[-1].id)

    def _count_session(self, row: SessionSummary) -> None:
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
                title=row.title,
                messages=row.message_count,
                steps=row.step_count,
            )
        )

    # -- rule 2: keep the newest K unexpired checkpoints of each session --------------------

    def _surplus_checkpoints(self, keep: int) -> None:
        for ids in self._session_pages():
            with self._ledger._transaction(writes=self._apply) as work:
                checkpoints = CheckpointRepository(work)
                if self._apply:
                    doomed = checkpoints.prune_sessions(ids, keep, at=self.now)
                else:
                    doomed = checkpoints.prunable(ids, keep, at=self.now)
            for info in sorted(doomed, key=lambda info: (info.session_id, info.seq)):
                self._count_checkpoint(info, "expired" if self._expired(info) else "beyond_keep")

    def _session_pages(self) -> Iterator[list[str]]:
        """Ids of the sessions with checkpoints the rules cover, in pages."""
        survivors = self._survivors()
        after: str | None = None
        while True:
            with self._ledger._transaction(writes=False) as work:
                rows = SessionRepository(work).with_checkpoints(
                    survivors, after=after, limit=self._batch
                )
            page: list[str] = []
            estimate = 0
            for id, checkpoint_seq in rows:
                if page and estimate + checkpoint_seq > _PAGE_CHECKPOINTS:
                    break
                page.append(id)
                estimate += checkpoint_seq
            if not page:
                return
            yield page
            if len(rows) < self._batch and len(page) == len(rows):
                return
            after = page[-1]

    # -- rule 3: expired checkpoints --------------------------------------------------------

    def _expired_checkpoints(self) -> None:
        survivors = self._survivors()
        position: tuple[datetime, str] | None = None
        while True:
            with self._ledger._transaction(writes=self._apply) as work:
                checkpoints = CheckpointRepository(work)
                rows = checkpoints.expired(
                    survivors, at=self.now, after=position, limit=self._batch
                )
                if self._apply and rows:
                    doomed = checkpoints.delete_expired([row.ref for row in rows], at=self.now)
                else:
                    doomed = rows
            for info in sorted(doomed, key=lambda info: (info.session_id, info.seq)):
                self._count_checkpoint(info, "expired")
            if len(rows) < self._batch:
                return
            last = rows[-1]
            assert last.expires_at is not None
            position = (last.expires_at, last.ref)

    def _expired(self, info: CheckpointInfo) -> bool:
        return info.expires_at is not None and info.expires_at <= self.now

    def _count_checkpoint(self, info: CheckpointInfo, reason: Reason) -> None:
        self.tally.checkpoints += 1
        self._emit(
            PurgeItem(
                kind="checkpoint",
                id=info.ref,
                session_id=info.session_id,
                reason=reason,
                at=info.created_at,
                seq=info.seq,
                expires_at=info.expires_at,
                size=info.size,
            )
        )

    # -- rule 4: expired memory items ------------------------------------------------------

    def _expired_memories(self) -> None:
        position: tuple[datetime, tuple[str, ...], str] | None = None
        while True:
            with self._ledger._transaction(writes=self._apply) as work:
                memory = MemoryRepository(work)
                rows = memory.expired(after=position, limit=self._batch)
                doomed = rows
                if self._apply and rows:
                    gone = set(memory.delete_expired([(row.namespace, row.key) for row in rows]))
                    doomed = [row for row in rows if (row.namespace, row.key) in gone]
            for row in doomed:
                self.tally.memories += 1
                self._emit(
                    PurgeItem(
                        kind="memory",
                        id=row.key,
                        session_id=None,
                        reason="expired",
                        at=row.updated_at,
                        expires_at=row.expires_at,
                        namespace=row.namespace,
                    )
                )
            if len(rows) < self._batch:
                return
            last = rows[-1]
            assert last.expires_at is not None
            position = (last.expires_at, last.namespace, last.key)

    def _free_bytes(self) -> int | None:
        with self._ledger._connection() as connection:
            sizes = _sizes(connection)
        return None if sizes is None else sizes[1]


def _sizes(connection: Connection) -> tuple[int, int] | None:
    """``sqlite_sizes``, leaving no transaction open (VACUUM cannot run inside one)."""
    sizes = sqlite_sizes(connection)
    if connection.in_transaction():
        connection.rollback()
    return sizes


class Retention:
    """``ledger.retention``: delete what is past keeping, and (on SQLite) give the space
    back. See the module docstring for the rules."""

    def __init__(self, ledger: Host) -> None:
        self._ledger = ledger

    def plan_purge(
        self,
        policy: PurgePolicy,
        *,
        batch: int = DEFAULT_BATCH,
        on_item: ItemCallback | None = None,
    ) -> PurgeReport:
        """What ``purge(policy)`` would delete now, item by item to ``on_item``;
        changes nothing (a dry run).

        Raises:
            ValidationError: ``policy`` is not a PurgePolicy, or a bad batch.
        """
        return self._run(policy, apply=False, batch=batch, on_item=on_item)

    def purge(
        self,
        policy: PurgePolicy,
        *,
        batch: int = DEFAULT_BATCH,
        on_item: ItemCallback | None = None,
    ) -> PurgeReport:
        """Delete what ``policy`` selects, ``batch`` rows per transaction, each item to
        ``on_item`` as it goes. On SQLite the report says how much free space the file
        now holds (``vacuum`` gives it back).

        Raises:
            ValidationError: ``policy`` is not a PurgePolicy, or a bad batch.
        """
        return self._run(policy, apply=True, batch=batch, on_item=on_item)

    def _run(
        self, policy: PurgePolicy, *, apply: bool, batch: int, on_item: ItemCallback | None
    ) -> PurgeReport:
        if not isinstance(policy, PurgePolicy):
            raise ValidationError(
                f"policy must be a PurgePolicy, got {type(policy).__name__}", path="policy"
            )
        size = bounded_int(batch, "batch", low=1, high=MAX_BATCH)
        return _Purge(self._ledger, policy, apply=apply, batch=size, on_item=on_item).run()

    def vacuum(self) -> VacuumReport:
        """SQLite: rebuild the file without its free pages (needs the database's size
        again in free disk space, and waits for other writers).

        Raises:
            ValidationError: the database is not SQLite.
        """
        with self._ledger._connection() as connection:
            before = _sizes(connection)
            if before is None:
                raise ValidationError(
                    f"VACUUM here is for SQLite files; {connection.dialect.name} reuses freed "
                    "space on its own",
                    path="vacuum",
                )
            sqlite_vacuum(connection)
            after = _sizes(connection)
        assert after is not None
        return VacuumReport(before=before[0], after=after[0])

    def sqlite_sizes(self) -> tuple[int, int] | None:
        """SQLite: (file size, free bytes inside it); None on other databases."""
        with self._ledger._connection() as connection:
            return _sizes(connection)


class AsyncRetention:
    """``ledger.retention`` on the async API: each call is handed to the sync
    ``Retention`` in one greenlet hop."""

    def __init__(self, proxied: Retention) -> None:
        self._proxied = proxied
        self._run = in_greenlet

    # --- async proxies of Retention via _proxied ---
    # (generated by tools/generate_async.py; do not edit by hand)
    async def plan_purge(
        self,
        policy: PurgePolicy,
        *,
        batch: int = DEFAULT_BATCH,
        on_item: ItemCallback | None = None,
    ) -> PurgeReport:
        """What ``purge(policy)`` would delete now, item by item to ``on_item``;
        changes nothing (a dry run).

        Raises:
            ValidationError: ``policy`` is not a PurgePolicy, or a bad batch.
        """
        return await self._run(self._proxied.plan_purge, policy, batch=batch, on_item=on_item)

    async def purge(
        self,
        policy: PurgePolicy,
        *,
        batch: int = DEFAULT_BATCH,
        on_item: ItemCallback | None = None,
    ) -> PurgeReport:
        """Delete what ``policy`` selects, ``batch`` rows per transaction, each item to
        ``on_item`` as it goes. On SQLite the report says how much free space the file
        now holds (``vacuum`` gives it back).

        Raises:
            ValidationError: ``policy`` is not a PurgePolicy, or a bad batch.
        """
        return await self._run(self._proxied.purge, policy, batch=batch, on_item=on_item)

    async def vacuum(self) -> VacuumReport:
        """SQLite: rebuild the file without its free pages (needs the database's size
        again in free disk space, and waits for other writers).

        Raises:
            ValidationError: the database is not SQLite.
        """
        return await self._run(self._proxied.vacuum)

    async def sqlite_sizes(self) -> tuple[int, int] | None:
        """SQLite: (file size, free bytes inside it); None on other databases."""
        return await self._run(self._proxied.sqlite_sizes)

    # --- end of async proxies ---
