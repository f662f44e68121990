"""The unit of work: one transaction, written once against the sync ORM Session.

``Work`` is the single implementation of a transaction's life (begin, commit,
rollback, SAVEPOINT when joining a caller's transaction). The sync ``UnitOfWork``
calls it directly; the async twin hands the same calls to ``AsyncSession.run_sync``,
so both APIs share every line of logic and differ only in how a call is awaited.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import wraps
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import Connection
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session

from ._json import Limits
from ._translate import translated
from .clock import Clock, checked_now
from .engine import WRITE_OPTION, check_borrowed_sqlite
from .errors import ConflictError, DatabaseError, UsageError

if TYPE_CHECKING:
    from .repositories import (
        CheckpointRepository,
        GrantRepository,
        MessageRepository,
        SessionRepository,
        StepRepository,
    )

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Settings:
    """What every unit of work of one ledger shares."""

    url: URL
    clock: Clock
    limits: Limits
    schema: str | None = None
    checked_engines: set[int] = field(default_factory=set, compare=False)

    def now(self) -> datetime:
        """The current time from the ledger's clock, aware and in UTC."""
        return checked_now(self.clock)

    def execution_options(self, *, writes: bool) -> dict[str, Any]:
        """Connection options of an owned unit of work: the schema map (PostgreSQL
        schema option) and the write flag (SQLite: BEGIN IMMEDIATE)."""
        options: dict[str, Any] = {WRITE_OPTION: writes}
        if self.schema is not None:
            options["schema_translate_map"] = {None: self.schema}
        return options


class Work:
    """The state of one transaction on one sync ORM Session.

    Owned: the session begins its own transaction (``BEGIN IMMEDIATE`` on SQLite when
    it will write). Joined: the session runs inside a caller's transaction in a
    SAVEPOINT, and the caller's commit is what makes it durable.
    """

    def __init__(self, session: Session, settings: Settings, *, writes: bool, joined: bool):
        self.session = session
        self.settings = settings
        self.writes = writes
        self.joined = joined
        self.rollback_only = False
        self.active = False
        self._restore: dict[str, Any] | None = None

    def begin(self) -> None:
        """Start the unit of work. Owned: nothing is sent yet; the session begins its
        transaction at the first statement, on an engine that carries the write flag
        (so a call refused by validation sends no SQL at all). Joined: the SAVEPOINT
        in the caller's transaction starts now."""
        if self.joined:
            with translated(self.settings.url):
                connection = self.session.connection()
                if self.settings.schema is not None:
                    self._restore = dict(connection.get_execution_options())
                    connection.execution_options(schema_translate_map={None: self.settings.schema})
                self._check_engine(connection)
        self.active = True

    def _check_engine(self, connection: Connection) -> None:
        engine_id = id(connection.engine)
        if engine_id not in self.settings.checked_engines:
            check_borrowed_sqlite(connection)
            self.settings.checked_engines.add(engine_id)

    def finish(self, failed: bool) -> None:
        """Commit, or roll back when the block failed or a conflict made it rollback-only."""
        try:
            with translated(self.settings.url):
                if failed or self.rollback_only:
                    self.session.rollback()
                else:
                    self.session.commit()
        finally:
            self.active = False
            try:
                if self._restore is not None:
                    self.session.connection().execution_options(**self._restore)
            finally:
                self.session.close()

    def transact(self, fn: Callable[[], R]) -> R:
        """Run ``fn`` as a whole transaction: begin, call, commit (or roll back)."""
        self.begin()
        try:
            result = fn()
        except BaseException:
            self.finish(failed=True)
            raise
        self.finish(failed=False)
        return result

    def ensure_usable(self, writes: bool) -> None:
        """Refuse work the transaction cannot do (ended, rollback-only, read-only)."""
        if not self.active:
            raise UsageError("this unit of work has ended; open a new one")
        if self.rollback_only:
            raise UsageError(
                "this unit of work hit a conflict and can only roll back; "
                "leave the block and start a new one (ledger.run retries for you)"
            )
        if writes and not self.writes:
            raise UsageError("a read-only unit of work cannot write")


class Repository:
    """Base of the repositories: the single implementation of each operation."""

    def __init__(self, work: Work) -> None:
        self._work = work

    @property
    def _session(self) -> Session:
        return self._work.session


RepoT = TypeVar("RepoT", bound=Repository)


def operation(
    *, writes: bool
) -> Callable[[Callable[Concatenate[RepoT, P], R]], Callable[Concatenate[RepoT, P], R]]:
    """Mark a repository method as one operation: checks, error translation, and the
    rollback-only rule after a conflict. ``writes`` says whether it needs a write lock."""

    def decorate(method: Callable[Concatenate[RepoT, P], R]) -> Callable[Concatenate[RepoT, P], R]:
        @wraps(method)
        def run(self: RepoT, /, *args: P.args, **kwargs: P.kwargs) -> R:
            work = self._work
            work.ensure_usable(writes)
            try:
                with translated(work.settings.url):
                    return method(self, *args, **kwargs)
            except (ConflictError, DatabaseError):
                work.rollback_only = True
                raise

        run.writes = writes  # type: ignore[attr-defined]
        return run

    return decorate


def writes_of(method: Callable[..., Any]) -> bool:
    """Whether a repository operation needs a write transaction."""
    return bool(getattr(method, "writes", True))


# Which ledgers have a unit of work open, and for which task or thread: a ledger-level
# call from that same task would wait on its own lock, so it is refused instead.
_open_units: contextvars.ContextVar[frozenset[tuple[int, object]]] = contextvars.ContextVar(
    "agentledger_open_units", default=frozenset()
)


def _owner() -> object:
    try:
        task = asyncio.current_task()
    except RuntimeError:
        task = None
    return task if task is not None else threading.get_ident()


@contextmanager
def marked_open(ledger_key: int) -> Iterator[None]:
    """Record that the current task holds a unit of work of ``ledger_key``."""
    token = _open_units.set(_open_units.get() | {(ledger_key, _owner())})
    try:
        yield
    finally:
        _open_units.reset(token)


def refuse_if_open(ledger_key: int) -> None:
    """Raise UsageError when the current task holds a unit of work of ``ledger_key``."""
    if (ledger_key, _owner()) in _open_units.get():
        raise UsageError(
            "a ledger-level call (or a second unit of work) inside an open unit of work of "
            "the same task could wait on that unit of work's own lock; use the unit of "
            "work's repositories (uow.sessions, uow.messages, ...) instead"
        )


class UnitOfWork:
    """One write transaction with the repositories (sync API).

    Leaving the ``with`` block commits; an exception rolls back; after a
    ConflictError the unit of work is rollback-only.
    """

    def __init__(self, work: Work) -> None:
        from .repositories import (
            CheckpointRepository,
            GrantRepository,
            MessageRepository,
            SessionRepository,
            StepRepository,
        )

        self._work = work
        self.sessions: SessionRepository = SessionRepository(work)
        """Sessions of this unit of work."""
        self.messages: MessageRepository = MessageRepository(work)
        """Messages of this unit of work."""
        self.steps: StepRepository = StepRepository(work)
        """Steps of this unit of work."""
        self.grants: GrantRepository = GrantRepository(work)
        """Grants of this unit of work."""
        self.checkpoints: CheckpointRepository = CheckpointRepository(work)
        """Checkpoints of this unit of work."""

    def __enter__(self) -> UnitOfWork:
        self._work.begin()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        self._work.finish(failed=exc_type is not None)

    @property
    def session(self) -> Session:
        """The ORM Session of this unit of work, for direct queries on the models."""
        return self._work.session
