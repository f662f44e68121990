"""One ledger-level call, one fresh transaction, retried: the runner behind ``Ledger``.

A repository bound to a ledger hands each operation to its runner (``perform``), which
opens a transaction on one of two transports, runs the operation in it under
``Work.perform``'s rules, and runs it again after a transient failure:

- SQLAlchemy's: an ORM Session on the ledger's engine, with the options of a write, a
  read or a snapshot read (``binds``). Every operation can run here.
- driver SQL (``_driver``): prebuilt statements on a pooled DBAPI connection, for the
  operations marked ``on_driver``, when the ledger's ``driver_sql`` option is on and
  the engine can take it. An operation that reaches for what only SQLAlchemy has
  (``_driver.Fallback``) rolls back and runs again on SQLAlchemy's transport.

On a ledger with read replicas (``readers=``), a read runs on the next reader
(``engine.readers``) on SQLAlchemy's transport, unless its caller asks for the primary
(``from_reader=False``: the ledger's ``primary`` face, units of work, writes); a reader
that cannot be reached rests and the read runs on the next reader, else the primary.

The runner also holds what every call needs first: readiness (the schema check and the
capability probe at first use) and the guard that refuses a ledger-level call inside
an open unit of work of the same task, which would wait on that unit's own lock.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from typing import Any, TypeVar, cast

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session

from . import _driver, migrations
from ._concurrency import Waits
from ._dialects import capabilities
from ._probe import cluster_of, probe
from ._retry import (
    LOST_CONNECTION_RETRIES,
    RetryPolicy,
    is_lost_before_commit,
    retrying,
    transient_or_replayable,
)
from ._translate import translated, translated_commit
from .engine import (
    Engines,
    MemoryDatabase,
    check_borrowed_sqlite,
    is_read_only,
    mask,
    read_only_options,
    repair_aiomysql_bytes,
)
from .engine.readers import Reader, Readers
from .errors import (
    AgentLedgerError,
    DatabaseError,
    DatabaseUnavailableError,
    ReadOnlyDatabaseError,
    UsageError,
    ValidationError,
)
from .repositories._base import Settings, Work
from .repositories._statements import snapshot_read_options

R = TypeVar("R")
SessionFactory = Callable[..., Session]
"""Makes the ORM Session of a unit of work from a bind and Session options."""
Transport = Callable[[bool, bool, list[Work]], AbstractContextManager[Work]]
"""Opens one attempt's transaction (``writes``, ``snapshot``) and appends its ``Work``
to the list it is given, for the retry rule to read."""

_keys = itertools.count(1)
_NO_READER = object()
"""What ``LedgerRunner._on_a_reader`` returns when no reader answered."""


class LedgerRunner:
    """The transactions of one sync ledger: readiness, the transports, the retry."""

    def __init__(
        self,
        engines: Engines,
        settings: Settings,
        *,
        owns_engine: bool,
        memory: MemoryDatabase | None,
        waits: Waits,
        session_factory: SessionFactory,
        driver_sql: bool,
        retry: RetryPolicy | None = None,
        readers: Readers | None = None,
    ) -> None:
        self._engines = engines
        self.readers = readers or Readers([])
        """The read replicas ledger-level reads go to (none: every read on the primary)."""
        self.settings = settings
        """The configuration every transaction of this ledger shares."""
        self.waits = waits
        """How this ledger waits (blocking, or in a greenlet of an async face)."""
        self.key = next(_keys)
        """This ledger's identity for the open-unit guard (``marked_open``)."""
        self.owns_engine = owns_engine
        self.memory = memory
        self.closed = False
        self.ready = False
        """Whether the first-use checks passed (cleared by an upgrade)."""
        self._session_factory = session_factory
        self._ready_lock = waits.lock()
        self._read_options: dict[str, Any] = {}
        self._binds_of: weakref.WeakKeyDictionary[Engine, dict[str, Engine]] = (
            weakref.WeakKeyDictionary()
        )
        reason = _driver.unavailable(engines(), owns_engine=owns_engine, schema=settings.schema)
        self.on_driver = driver_sql and reason is None
        """Whether operations marked ``on_driver`` take driver SQL (``_driver``)."""
        self._retry = retry
        """The policy the ledger was given, or None for its database's default."""
        self._default_retry = RetryPolicy(
            attempts=capabilities(engines.main.dialect).retry_attempts
        )
        _RUNNERS.add(self)

    @property
    def retry_policy(self) -> RetryPolicy:
        """How this ledger runs work again: the policy it was given, else the default
        budget of its database (``Capabilities.retry_attempts``: a cluster's once the
        probe found one at first use)."""
        return self._retry or self._default_retry

    # -- readiness --------------------------------------------------------------------------

    def check_open(self) -> None:
        """Refuse a call on a closed ledger."""
        if self.closed:
            raise UsageError("this ledger is closed")

    def ensure_ready(self) -> None:
        """First use: refuse what cannot work, check (or, in memory, build) the schema,
        then probe what conflict detection and exact round trips rely on."""
        self.check_open()
        if self.ready:
            return
        with self._ready_lock:
            if self.ready:
                return
            with translated(self.settings.url), self.engine.connect() as connection:
                self._prepare(connection)
                if connection.in_transaction():
                    connection.commit()
            self._binds_of.clear()  # made again with the read options just learned
            self.ready = True

    def _has_readers(self, writes: bool, from_reader: bool) -> bool:
        """Whether a call goes to a reader: a read not asked of the primary, on a ledger
        with readers."""
        return not writes and from_reader and bool(self.readers)

    def _on_a_reader(self, attempt: Callable[[Engine], R]) -> R | object:
        """``attempt`` on the readers' engines in turn until one answers (a reader that
        cannot be reached is put to rest and skipped), or ``_NO_READER`` when none does.
        The primary is checked first, so a reader's error is its own."""
        self.ensure_ready()
        while (reader := self.readers.next()) is not None:
            try:
                self._check_reader(reader)
                return attempt(reader.engines())
            except DatabaseUnavailableError as error:
                self.readers.rest(reader, error)
        return _NO_READER

    def _check_reader(self, reader: Reader) -> None:
        """A reader's first read: agentledger's schema must be at the revision this
        version needs (a replica that has not replayed an upgrade yet is refused, as the
        primary would be)."""
        if reader.checked:
            return
        with self._ready_lock:
            if reader.checked:
                return
            engine = reader.engines()
            with translated(engine.url), engine.connect() as connection:
                migrations.check(connection, schema=self.settings.schema)
                if connection.in_transaction():
                    connection.rollback()
            reader.checked = True

    def _prepare(self, connection: Connection) -> None:
        if not connection.dialect.supports_sane_rowcount:
            raise DatabaseError(
                f"the {connection.dialect.name} driver {connection.dialect.driver} cannot "
                "report how many rows an UPDATE matched, so concurrent writers could not "
                "be detected; use a driver that can"
            )
        repair_aiomysql_bytes(connection.dialect)
        # Before agentledger's tables are read: on a database that lacks a capability,
        # that is the answer, not a schema at the wrong revision.
        probe(connection)
        schema = self.settings.schema
        if self.memory is not None:
            migrations.upgrade(connection, schema=schema)
        else:
            migrations.check(connection, schema=schema)
        check_borrowed_sqlite(connection)
        found = capabilities(connection.dialect, cluster=cluster_of(connection))
        self._default_retry = RetryPolicy(attempts=found.retry_attempts)
        self._read_options = read_only_options(connection)

    @property
    def engine(self) -> Engine:
        """The engine a transaction begun now runs on (an async ledger's: the running
        event loop's, ``engine.loops``)."""
        return self._engines()

    def _binds(self, engine: Engine | None = None) -> dict[str, Engine]:
        """``engine`` (default: the primary's) with the options of owned write, read and
        snapshot transactions."""
        engine = engine or self.engine
        found = self._binds_of.get(engine)
        if found is None:
            found = self._binds_of[engine] = self._binds_for(engine)
        return found

    def _binds_for(self, engine: Engine) -> dict[str, Engine]:
        options = self.settings.execution_options
        return {
            "write": engine.execution_options(**options(writes=True)),
            "read": engine.execution_options(**options(writes=False), **self._read_options),
            "snapshot": engine.execution_options(
                **options(writes=False), **snapshot_read_options(engine.dialect.name)
            ),
        }

    # -- transactions -----------------------------------------------------------------------

    def new_work(
        self,
        *,
        writes: bool,
        join: Connection | Session | None = None,
        session_factory: SessionFactory | None = None,
        snapshot: bool = False,
        engine: Engine | None = None,
    ) -> Work:
        """A transaction, not begun yet. A unit of work's Session comes from the ledger's
        session factory (the async API puts an AsyncSession in front of it); a single
        operation's is a plain Session. ``snapshot``: a read-only transaction that sees
        one consistent snapshot. ``engine``: a reader's, for a read (default: the
        primary's)."""
        self.ensure_ready()
        if writes and join is None and is_read_only(self.settings.url):
            raise ReadOnlyDatabaseError(
                f"{mask(self.settings.url)} is opened read-only: this process cannot "
                "write the SQLite file or its folder (read-only media?), so it can only "
                "be read"
            )
        make_session = session_factory or self._session_factory
        options: dict[str, Any] = {"expire_on_commit": False, "autoflush": False}
        if join is None:
            bind = self._binds(engine)["write" if writes else "snapshot" if snapshot else "read"]
            session = make_session(bind=bind, **options)
            return Work(session, self.settings, writes=writes, joined=False, snapshot=snapshot)
        if isinstance(join, Session):
            join.flush()
            join = join.connection()
        if not isinstance(join, Connection):
            raise ValidationError(
                f"join= takes a Connection or an ORM Session, got {type(join).__name__}",
                path="join",
            )
        options["join_transaction_mode"] = "create_savepoint"
        session = make_session(bind=join, **options)
        return Work(session, self.settings, writes=True, joined=True)

    def perform(
        self,
        writes: bool,
        call: Callable[[Work], R],
        snapshot: bool = False,
        on_driver: bool = False,
        *,
        from_reader: bool = True,
    ) -> R:
        """Run one repository operation in a fresh transaction of its own (on driver SQL
        when ``on_driver`` and this ledger takes it), again after a transient failure
        (a deadlock, a lock refused at once, a stale statement cache), once after a
        connection lost before its COMMIT was sent (nothing of it was stored: a pooled
        connection the server dropped, which the idle-only pre-ping let through;
        ``LOST_CONNECTION_RETRIES``), and after a commit of unknown outcome only when
        the operation said its replay is harmless (``Work.replay_safe``). A read runs on
        a reader when the ledger has one and ``from_reader``."""
        refuse_if_open(self.key)
        if self._has_readers(writes, from_reader):
            found = self._on_a_reader(
                lambda engine: self._retried(
                    partial(self._session_transaction, engine=engine), writes, snapshot, call
                )
            )
            if found is not _NO_READER:
                return cast(R, found)
        if on_driver and self._takes_driver(writes):
            try:
                return self._retried(self._driver_transaction, writes, snapshot, call)
            except _driver.Fallback:
                pass  # nothing of it stored: run it on SQLAlchemy's transport
        return self._retried(self._session_transaction, writes, snapshot, call)

    def _takes_driver(self, writes: bool) -> bool:
        if not self.on_driver or _driver.steps_aside(self.engine):
            return False
        self.ensure_ready()
        # A read-only file: SQLAlchemy's transport says why a write cannot run.
        return not (writes and is_read_only(self.settings.url))

    def _retried(
        self, transport: Transport, writes: bool, snapshot: bool, call: Callable[[Work], R]
    ) -> R:
        begun: list[Work] = []  # the attempt's transaction, once it exists

        def attempt() -> R:
            begun.clear()
            with transport(writes, snapshot, begun) as work:
                return work.perform(writes, call)

        lost = itertools.count(1)

        def lost_before_commit(error: BaseException) -> bool:
            if not (begun and is_lost_before_commit(error, begun[0].commit_sent)):
                return False
            return next(lost) <= LOST_CONNECTION_RETRIES

        replayable = transient_or_replayable(lambda: bool(begun) and begun[0].replay_safe)
        return retrying(
            attempt,
            policy=lambda: self.retry_policy,
            retry_on=lambda error: lost_before_commit(error) or replayable(error),
            sleep=self.waits.sleep,
            what=call.__qualname__,
        )

    @contextmanager
    def _session_transaction(
        self, writes: bool, snapshot: bool, begun: list[Work], engine: Engine | None = None
    ) -> Iterator[Work]:
        """SQLAlchemy's transport: a plain ORM Session's transaction (on ``engine``, a
        reader's, else the primary's)."""
        work = self.new_work(
            writes=writes, snapshot=snapshot, session_factory=Session, engine=engine
        )
        work.one_operation = True
        begun.append(work)
        with work:
            yield work

    @contextmanager
    def _driver_transaction(
        self, writes: bool, snapshot: bool, begun: list[Work]
    ) -> Iterator[Work]:
        """Driver SQL's transport (``_driver.transaction``), its errors translated as
        SQLAlchemy's transport translates them. (A snapshot read is one statement on
        driver SQL, which sees one snapshot.)"""
        url = self.settings.url
        engine = self.engine
        autocommit = _driver.driver_one_statement(engine.dialect, self._read_options, writes=writes)
        driver: _driver.DriverConnection | None = None
        work: Work | None = None
        try:
            with _driver.transaction(
                engine, writes=writes, autocommit=autocommit, url=url
            ) as driver:
                work = Work(None, self.settings, writes=writes, joined=False, executor=driver)
                work.one_operation = work.active = True
                begun.append(work)
                yield work
        except (_driver.Fallback, AgentLedgerError):
            raise
        except Exception:
            sent = writes and driver is not None and driver.commit_sent
            with translated_commit(url) if sent else translated(url):
                raise
        finally:
            if work is not None and driver is not None:
                # A read's COMMIT leaves nothing in doubt (as ``Work.finish`` reads it).
                work.commit_sent = writes and driver.commit_sent

    @contextmanager
    def transaction(
        self, *, writes: bool, snapshot: bool = False, from_reader: bool = True
    ) -> Iterator[Work]:
        """A fresh transaction for the ledger's own parts (export, import, purge), which
        bind the repositories they need to it; ``snapshot``: a read that sees one
        snapshot however long it lasts. A read runs on a reader when the ledger has one
        and ``from_reader``, begun there before the block runs (a reader that cannot
        be reached rests and the next reader, else the primary, takes the read)."""
        refuse_if_open(self.key)
        work: Work | None = None
        if self._has_readers(writes, from_reader):

            def begun_on(engine: Engine) -> Work:
                opened = self.new_work(
                    writes=False, snapshot=snapshot, session_factory=Session, engine=engine
                )
                try:
                    with translated(self.settings.url):
                        opened.session.connection()  # reached now, or another takes the read
                except BaseException:
                    opened.session.close()
                    raise
                return opened

            found = self._on_a_reader(begun_on)
            work = None if found is _NO_READER else cast(Work, found)
        if work is None:
            work = self.new_work(writes=writes, snapshot=snapshot, session_factory=Session)
        with work:
            yield work

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """A connection outside any transaction, rolled back after (SQLite's VACUUM)."""
        refuse_if_open(self.key)
        self.ensure_ready()
        with translated(self.settings.url), self.engine.connect() as connection:
            yield connection
            if connection.in_transaction():
                connection.rollback()

    def close(self) -> None:
        """Release the engine if this ledger created it; a borrowed one is left alone."""
        if self.closed:
            return
        self.closed = True
        self._engines.dispose()
        self.readers.dispose()
        if self.memory is not None:
            self.memory.close()

    def forget_connections(self) -> None:
        """In a child after ``os.fork()``: let go of the parent's pooled connections
        without closing them (the parent still uses them); the child opens its own."""
        self._engines.forget_connections()
        self.readers.forget_connections()


class PrimaryReads:
    """A runner's reads on the primary (the scope of ``Ledger.primary``'s repositories):
    for a caller that must see its own writes."""

    def __init__(self, runner: LedgerRunner) -> None:
        self._runner = runner
        self.settings = runner.settings

    def perform(
        self,
        writes: bool,
        call: Callable[[Work], R],
        snapshot: bool = False,
        on_driver: bool = False,
        /,
    ) -> R:
        """``LedgerRunner.perform`` on the primary."""
        return self._runner.perform(writes, call, snapshot, on_driver, from_reader=False)


_RUNNERS: weakref.WeakSet[LedgerRunner] = weakref.WeakSet()


def _forget_connections_in_child() -> None:
    """A child process must not use its parent's connections: two processes on one
    connection interleave their statements and transactions (a pre-fork server that
    built its ledger before forking workers)."""
    for runner in list(_RUNNERS):
        runner.forget_connections()


os.register_at_fork(after_in_child=_forget_connections_in_child)


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
    units = _open_units.get()
    if units and (ledger_key, _owner()) in units:
        raise UsageError(
            "a ledger-level call (or a second unit of work) inside an open unit of work of "
            "the same task could wait on that unit of work's own lock; use the unit of "
            "work's repositories (uow.sessions, uow.messages, ...) instead"
        )
