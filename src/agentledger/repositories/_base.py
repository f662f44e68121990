"""What every repository stands on: the transaction it runs in and the ``@operation`` rule.

A repository is bound to a *scope*. A ``Work`` (one transaction: a unit of work) runs
each operation inside itself; a ``Ledger`` runs each operation in a fresh transaction
of its own, retried after a transient failure. Either way the operation's body is the
same sync code against one ORM ``Session``: ``@operation`` hands it the ``Work`` to run
in, so a repository bound to a ledger and one bound to a unit of work share every line.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from functools import wraps
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from sqlalchemy import Connection
from sqlalchemy.engine import URL, Dialect, Engine
from sqlalchemy.orm import Session
from sqlalchemy.sql import Executable

from .._driver import Fallback
from .._json import Limits
from .._translate import translated, translated_commit
from ..clock import Clock, checked_now
from ..engine import ONE_STATEMENT_OPTION, WRITE_OPTION, check_borrowed_sqlite
from ..errors import ConflictError, DatabaseError, UsageError
from ._keywords import TextIndex
from ._statements import begin_snapshot

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Settings:
    """What every transaction of one ledger shares."""

    url: URL
    clock: Clock
    limits: Limits
    schema: str | None = None
    checked_engines: weakref.WeakSet[Engine] = field(default_factory=weakref.WeakSet, compare=False)
    """The engines of joined connections checked already (``check_borrowed_sqlite``):
    held weakly and known by identity, not by ``id()``, which a new engine may reuse."""
    text_indexes: weakref.WeakKeyDictionary[Dialect, TextIndex] = field(
        default_factory=weakref.WeakKeyDictionary, compare=False
    )
    """What each engine's text index over memory items holds (by its dialect), read at
    its first keyword search."""

    def now(self) -> datetime:
        """The current time from the ledger's clock, aware and in UTC."""
        return checked_now(self.clock)

    def execution_options(self, *, writes: bool) -> dict[str, Any]:
        """Connection options of an owned transaction: the schema map (PostgreSQL
        schema option) and the write flag (SQLite: BEGIN IMMEDIATE)."""
        options: dict[str, Any] = {WRITE_OPTION: writes}
        if self.schema is not None:
            options["schema_translate_map"] = {None: self.schema}
        return options


class Rows(Protocol):
    """The answer of one statement, as repositories read it (a ``CursorResult``, or
    driver SQL's rows read at once)."""

    @property
    def rowcount(self) -> int:
        """How many rows the statement changed (or matched, on MariaDB/MySQL's found
        rows)."""
        ...

    def all(self) -> Sequence[Any]:
        """Every row."""
        ...

    def first(self) -> Any:
        """The first row, or None."""
        ...

    def scalar_one_or_none(self) -> Any:
        """The first column of the only row, or None."""
        ...

    def __iter__(self) -> Iterator[Any]: ...


class Executor(Protocol):
    """Where a transaction's prebuilt Core statements run: the ORM Session's
    ``Connection``, or a driver SQL connection (``_driver.DriverConnection``). Every
    statement a repository sends outside the ORM goes through one of these two."""

    @property
    def dialect(self) -> Dialect:
        """The dialect the statements are compiled for."""
        ...

    def execute(
        self,
        statement: Executable,
        parameters: dict[str, Any] | list[dict[str, Any]] | None = None,
        /,
    ) -> Rows:
        """Run ``statement`` with ``parameters`` (a list: once per item)."""
        ...


class Work:
    """One transaction on one sync ORM Session; a context manager (begin, then commit
    or roll back).

    Owned: the session begins its own transaction at its first statement (``BEGIN
    IMMEDIATE`` on SQLite when it will write), so a call refused by validation sends no
    SQL at all. Joined: the session runs inside a caller's transaction in a SAVEPOINT,
    and the caller's commit is what makes it durable.
    """

    def __init__(
        self,
        session: Session | None,
        settings: Settings,
        *,
        writes: bool,
        joined: bool,
        snapshot: bool = False,
        executor: Executor | None = None,
    ):
        self._orm_session = session
        self.executor = executor
        """The executor of a transaction without an ORM Session (driver SQL: the
        runner's driver transport); None when its statements run on the Session's
        connection."""
        self.settings = settings
        self.writes = writes
        self.joined = joined
        self.snapshot = snapshot
        """A read-only transaction that must see one snapshot (see ``begin``)."""
        self.rollback_only = False
        self.active = False
        self.replay_safe = False
        """Whether the last write operation is harmless to run again after a commit of
        unknown outcome (set by the operation: an append whose every item has a key).
        The ledger reads it for the one-operation transactions it retries."""
        self.wrote = False
        """Whether an operation that writes ran in this transaction."""
        self.commit_sent = False
        """Whether COMMIT was sent: a connection lost after that leaves the outcome unknown."""
        self.one_operation = False
        """Whether this transaction runs one repository operation and nothing else (a
        ledger's call, not a unit of work): set by the ledger."""
        self._restore: dict[str, Any] | None = None

    @property
    def session(self) -> Session:
        """The transaction's ORM Session. A transaction on driver SQL has none: an
        operation that needs one falls back to SQLAlchemy (``_driver.Fallback``)."""
        if self._orm_session is None:
            raise NeedsSession("this operation needs an ORM Session")
        return self._orm_session

    def connection(self) -> Executor:
        """Where the transaction's prebuilt statements run: its executor, else the
        Session's Connection (which begins the transaction)."""
        if self.executor is not None:
            return self.executor
        return self.session.connection()

    @property
    def dialect(self) -> Dialect:
        """The database's dialect, without beginning the transaction."""
        if self.executor is not None:
            return self.executor.dialect
        return self.session.get_bind().dialect

    def __enter__(self) -> Work:
        self.begin()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        self.finish(failed=exc_type is not None)

    def begin(self) -> None:
        """Start the transaction. Owned: nothing is sent yet (a snapshot read on
        MariaDB/MySQL: its START TRANSACTION, see ``_statements.begin_snapshot``). Joined:
        the SAVEPOINT in the caller's transaction starts now. One that fails to begin
        is ended as a failed one (its connection back in the pool, the caller's
        connection options as they were): no ``__exit__`` follows a failed ``__enter__``."""
        try:
            if self.snapshot:
                with translated(self.settings.url):
                    begin_snapshot(self.session.connection())
            if self.joined:
                with translated(self.settings.url):
                    connection = self.session.connection()
                    if self.settings.schema is not None:
                        self._restore = dict(connection.get_execution_options())
                        connection.execution_options(
                            schema_translate_map={None: self.settings.schema}
                        )
                    self._check_engine(connection)
        except BaseException:
            with suppress(Exception):  # the first error is the one to report
                self.finish(failed=True)
            raise
        self.active = True

    def finish(self, failed: bool) -> None:
        """Commit, or roll back when the block failed or a conflict made it rollback-only."""
        try:
            with translated(self.settings.url):
                if failed or self.rollback_only:
                    self.session.rollback()
                    return
                self.session.flush()
            # Joined, this releases a SAVEPOINT: the caller's COMMIT is the one in doubt.
            # A read-only transaction's COMMIT leaves nothing in doubt.
            committing = translated if self.joined or not self.writes else translated_commit
            self.commit_sent = True
            with committing(self.settings.url):
                self.session.commit()
        finally:
            self.active = False
            try:
                if self._restore is not None:
                    self.session.connection().execution_options(**self._restore)
            finally:
                self.session.close()

    def _check_engine(self, connection: Connection) -> None:
        engine = connection.engine
        if engine not in self.settings.checked_engines:
            check_borrowed_sqlite(connection)
            self.settings.checked_engines.add(engine)

    def perform(
        self,
        writes: bool,
        call: Callable[[Work], R],
        snapshot: bool = False,
        on_driver: bool = False,
    ) -> R:
        """Run one operation in this transaction: refused when the transaction cannot do
        it, driver errors translated, and rollback-only after a conflict. (``snapshot``
        and ``on_driver`` ask a ledger's runner for a kind of transaction; here the
        operation runs in this one.)"""
        self.ensure_usable(writes)
        if writes:
            self.replay_safe = False
            self.wrote = True
        try:
            with translated(self.settings.url):
                return call(self)
        except (ConflictError, DatabaseError):
            self.rollback_only = True
            raise

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


class NeedsSession(Fallback):
    """An operation on driver SQL reached for the ORM Session."""


class Scope(Protocol):
    """Where a repository's operations run: a ``Work`` (one transaction) or a ledger's
    runner (``_runner.LedgerRunner``: a fresh transaction per operation)."""

    settings: Settings

    def perform(
        self,
        writes: bool,
        call: Callable[[Work], R],
        snapshot: bool = False,
        on_driver: bool = False,
        /,
    ) -> R:
        """Run ``call`` as one operation (see ``operation``)."""
        ...


class Repository:
    """Base of the repositories: the single implementation of each operation.

    Bound to a unit of work's ``Work``, every operation runs in that transaction; bound
    to a ledger, each runs in a fresh transaction of its own.
    """

    _work: Work
    """The transaction an operation runs in (set only while it can be used)."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope
        if isinstance(scope, Work):
            self._work = scope

    @property
    def _session(self) -> Session:
        return self._work.session

    def _connection(self) -> Executor:
        """Where prebuilt Core statements run: the transaction's executor (on driver
        SQL, the driver's connection; else the Session's), with no ORM in the way."""
        return self._work.connection()

    def _one_statement_connection(self) -> Executor:
        """The executor for a read that is one statement: on driver SQL the driver's
        connection, else ``_one_statement_session_connection``."""
        work = self._work
        if work.executor is not None:
            return work.executor
        return self._one_statement_session_connection()

    def _one_statement_session_connection(self) -> Connection:
        """The Session's connection for a read that is one statement: in a ledger's call
        of its own, on SQLite, without the explicit BEGIN of a read transaction (one
        statement in the driver's autocommit is one snapshot:
        ``engine.ONE_STATEMENT_OPTION``); in a unit of work, or once the transaction has
        begun, the transaction's own. A later statement of the call runs in autocommit
        too: only an operation whose other reads need not share the first one's
        snapshot (a look at the session row when nothing was found) reads through it."""
        work = self._work
        if work.one_operation and not work.writes and not self._session.in_transaction():
            return self._session.connection(execution_options={ONE_STATEMENT_OPTION: True})
        return self._session.connection()

    def _within(self, work: Work) -> Any:
        """This repository in ``work``: itself when bound to it, else a copy bound to it."""
        return self if self._scope is work else type(self)(work)


RepoT = TypeVar("RepoT", bound=Repository)


def operation(
    *, writes: bool, snapshot: bool = False, on_driver: bool = False
) -> Callable[[Callable[Concatenate[RepoT, P], R]], Callable[Concatenate[RepoT, P], R]]:
    """Mark a repository method as one operation, run by the repository's scope: checks,
    error translation, the rollback-only rule after a conflict, and (on a ledger) its
    own retried transaction. ``writes`` says whether it needs a write transaction;
    ``snapshot``, a read whose statements must all see one snapshot (on a ledger, a
    read-only snapshot transaction; in a unit of work, that unit's transaction).
    ``on_driver``: on a ledger whose runner allows it, run it on driver SQL
    (``_driver``: a hot call whose statements are all prebuilt), falling back to
    SQLAlchemy when it reaches for what only SQLAlchemy has."""

    def decorate(method: Callable[Concatenate[RepoT, P], R]) -> Callable[Concatenate[RepoT, P], R]:
        name = method.__qualname__

        @wraps(method)
        def run(self: RepoT, /, *args: P.args, **kwargs: P.kwargs) -> R:
            def call(work: Work) -> R:
                return method(self._within(work), *args, **kwargs)

            call.__qualname__ = name  # what a retry's warning names

            return self._scope.perform(writes, call, snapshot, on_driver)

        run.writes = writes  # type: ignore[attr-defined]
        return run

    return decorate
