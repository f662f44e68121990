"""Ledger (the sync core) and AsyncLedger (its async face): the entry points of the API.

``Ledger`` holds the repositories, units of work and ``run``; its runner
(``_runner.LedgerRunner``) holds the engine, readiness (the schema check and
capability probe at first use) and one fresh, retried transaction per ledger-level
call, on SQLAlchemy or on driver SQL (the ``driver_sql`` option). ``AsyncLedger``
holds a ``Ledger`` built on its AsyncEngine's ``sync_engine`` (as ``AsyncEngine``
holds an ``Engine``) and hands every call to it in one greenlet hop, where the async
driver's I/O is awaited.

On a SQLite file whose engine it created, an ``AsyncLedger`` also holds a second
``Ledger`` on a sync twin engine (pysqlite, the same file and set-up, the same
``Settings``) and runs each ledger-level call (``ledger.messages.append(...)``) as one
call of it in one worker-thread hop: aiosqlite makes a hop per cursor call (about eight
per append). Units of work and ``run`` stay on the AsyncEngine: a unit of work holds the
write lock across awaits, and threads waiting on it would starve the pool.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession
from sqlalchemy.orm import Session

from . import migrations
from ._concurrency import (
    BLOCKING,
    GREENLET,
    Runner,
    ThreadHop,
    Waits,
    async_context,
    await_,
    in_greenlet,
    spawn,
)
from ._dialects import capabilities
from ._json import Limits
from ._retry import RetryPolicy, checked_policy, policy_of_run, retrying, should_retry
from ._runner import LedgerRunner, PrimaryReads, marked_open, refuse_if_open
from .clock import Clock, system_clock
from .engine import (
    EnginePerLoop,
    MemoryDatabase,
    OneEngine,
    check_supported,
    configure_timeouts,
    create_async_engine_for,
    create_sqlite_twin,
    create_sync_engine,
    validate_schema,
)
from .engine.readers import Readers, check_replica
from .environment import MAX_TIMEOUT_S
from .errors import ValidationError
from .langgraph_records import LANGGRAPH_APP_NAME
from .repositories import (
    AppStateRepository,
    AsyncAppStateRepository,
    AsyncCheckpointRepository,
    AsyncGrantRepository,
    AsyncLangGraphRepository,
    AsyncMemoryRepository,
    AsyncMessageRepository,
    AsyncSessionRepository,
    AsyncStepRepository,
    AsyncUserStateRepository,
    CheckpointRepository,
    GrantRepository,
    LangGraphRepository,
    MemoryRepository,
    MessageRepository,
    SessionRepository,
    StepRepository,
    UserStateRepository,
)
from .repositories._base import Scope, Settings, Work
from .retention import AsyncRetention, Retention
from .transfer import AsyncTransfer, Transfer
from .uow import ASYNC_SESSION_KEY, AsyncUnitOfWork, UnitOfWork

R = TypeVar("R")


class Ledger:
    """agentledger's entry point (sync API): sessions, messages, steps, grants and
    checkpoints, each operation in its own transaction, or several in a unit of work.

    Args:
        url: database URL; None means ``AGENTLEDGER_DATABASE_URL``, else
            ``sqlite:///agentledger.db`` in the current folder. A plain ``postgresql://``,
            ``mysql://`` or ``sqlite:///`` URL picks the right driver.
        engine: an existing Engine to use instead (it is never disposed here).
        schema: PostgreSQL only: the schema holding agentledger's tables.
        clock: the source of "now" (for tests); must return aware datetimes.
        limits: JSON size and depth limits.
        lock_timeout: seconds a statement waits for a lock before ``DatabaseLockedError``
            (default 15; MariaDB/MySQL round up to whole seconds). A wait that runs out
            is never retried, so this is the longest any lock wait lasts.
        statement_timeout: seconds a statement may run before ``QueryCancelledError``
            (PostgreSQL, MariaDB/MySQL; default: none). Both apply to the engine the
            ledger creates; with ``engine=``, set them on your engine. A dialect
            agentledger was not tested on gets neither, and refuses either given.
        driver_sql: run LangGraph's hot calls as prebuilt statements on the driver's
            connection, past SQLAlchemy's per-statement work (``agentledger._driver``),
            where it can: SQLite and PostgreSQL, on an engine the ledger creates,
            without ``schema``. ``False`` sends every statement through SQLAlchemy.
            SQL logging (``echo``) shows these statements too; with a
            ``before_cursor_execute`` or ``after_cursor_execute`` listener on the
            engine they go through SQLAlchemy, so the listener sees them.
        engine_options: keyword arguments of SQLAlchemy's ``create_engine`` for the
            engine the ledger creates (``pool_size``, ``max_overflow``,
            ``pool_recycle``, ``pool_pre_ping``, ``echo``, ``connect_args``...); the
            ledger's own set-up of that engine (SQLite's pragmas, the timeouts, the
            reset on return, the idle ping unless ``pool_pre_ping`` is given) stays.
            With ``engine=``, configure your engine instead.
        retry: how the ledger runs work again after a failure worth another try (a
            ``RetryPolicy``): its own retry of each ledger-level call after a
            transient failure, and ``run``'s retry of a unit of work. Default: the
            database's budget, 4 attempts (30 on a Galera node the probe finds at
            first use) with full-jitter backoff from 10 ms up to 1 s.
        read_your_writes: on a Galera node, each transaction of the engine the ledger
            creates first waits until the node has applied every write the cluster
            committed before it began (``wsrep_sync_wait = 15``, set on each new
            connection found to be a Galera node), so a read or a revision-checked
            write on one node sees what another acknowledged. ``False`` reads what the
            node has applied (a little faster; a record read stale is still caught as
            a conflict). No effect on one server, or with ``engine=``.
        readers: read replicas (URLs or Engines) of the primary, PostgreSQL hot
            standbys or Galera nodes: ledger-level reads (gets, listings,
            conversations, usage, export) go to them in turn, a read at a time; writes,
            units of work and ``run`` stay on the primary. A replica may lag: read
            through ``ledger.primary`` where a caller must see its own write (the
            framework stores do). A reader that cannot be reached is skipped for a
            few seconds, its reads going to the others or to the primary. A URL's
            engine is made like the primary's (``engine_options``, timeouts).
    """

    def __init__(
        self,
        url: str | URL | None = None,
        *,
        engine: Engine | None = None,
        schema: str | None = None,
        clock: Clock | None = None,
        limits: Limits | None = None,
        lock_timeout: float | None = None,
        statement_timeout: float | None = None,
        driver_sql: bool = True,
        engine_options: Mapping[str, Any] | None = None,
        retry: RetryPolicy | None = None,
        read_your_writes: bool = True,
        readers: Sequence[str | URL | Engine] | None = None,
        _memory: MemoryDatabase | None = None,
    ) -> None:
        _check_options(url, engine, clock, limits, driver_sql, read_your_writes)
        replicas = _checked_readers(readers, Engine)
        policy = checked_policy(retry)
        options = _checked_engine_options(engine, engine_options)
        timeouts = _checked_timeouts(engine, lock_timeout, statement_timeout)
        timeouts["cluster_sync_wait"] = read_your_writes
        if engine is not None and not isinstance(engine, Engine):
            raise ValidationError(
                f"Ledger takes a sync Engine, got {type(engine).__name__}; "
                "use AsyncLedger with an AsyncEngine",
                path="engine",
            )
        if engine is None:
            engine = _created(create_sync_engine, url, options)
            configure_timeouts(engine, **timeouts)
            owns_engine = True
        else:
            check_supported(engine)
            owns_engine = False
        reader_engines = []
        for reader in _no_readers_on_sqlite(engine, replicas):
            if isinstance(reader, Engine):
                check_supported(reader)
                reader_engines.append(OneEngine(reader, owned=False))
            else:
                made = _created(create_sync_engine, reader, options)
                configure_timeouts(made, **timeouts)
                reader_engines.append(OneEngine(made, owned=True))
            check_replica(engine, reader_engines[-1].main, len(reader_engines) - 1)
        self._setup(
            LedgerRunner(
                OneEngine(engine, owned=owns_engine),
                _settings(engine, schema, clock, limits),
                owns_engine=owns_engine,
                memory=_memory,
                waits=BLOCKING,
                session_factory=Session,
                driver_sql=driver_sql,
                retry=policy,
                readers=Readers(reader_engines),
            )
        )

    @classmethod
    def _on_runner(cls, runner: LedgerRunner, *, from_readers: bool = True) -> Ledger:
        """A ledger on ``runner``: how ``AsyncLedger`` builds the sync ledger behind it,
        and ``primary`` a ledger's face on the primary (``from_readers=False``)."""
        ledger = cls.__new__(cls)
        ledger._setup(runner, from_readers=from_readers)
        return ledger

    def _setup(self, runner: LedgerRunner, *, from_readers: bool = True) -> None:
        self._runner = runner
        """Runs each ledger-level call in a fresh, retried transaction (``_runner``)."""
        self._from_readers = from_readers and bool(runner.readers)
        scope: Scope = runner if self._from_readers else PrimaryReads(runner)
        self._scope = scope
        """Where the repositories' operations run: the runner, or its primary's face."""
        self._primary: Ledger | None = None if self._from_readers else self
        self.settings = runner.settings
        """The configuration every transaction of this ledger shares."""
        self._waits: Waits = runner.waits
        self.sessions = SessionRepository(scope)
        """Session operations, each in its own transaction."""
        self.messages = MessageRepository(scope)
        """Message operations, each in its own transaction."""
        self.steps = StepRepository(scope)
        """Step operations, each in its own transaction."""
        self.grants = GrantRepository(scope)
        """Grant operations, each in its own transaction."""
        self.checkpoints = CheckpointRepository(scope)
        """Checkpoint operations, each in its own transaction."""
        self.app_state = AppStateRepository(scope)
        """App state operations (state shared by an application's sessions)."""
        self.user_state = UserStateRepository(scope)
        """User state operations (state shared by one user's sessions of an application)."""
        self.memory = MemoryRepository(scope)
        """Long-term memory: items under namespaces, kept across sessions."""
        self.transfer = Transfer(self)
        """Export to JSON Lines, import, and copy to another ledger."""
        self.retention = Retention(self)
        """Purge what is past keeping; on SQLite, vacuum."""

    @classmethod
    def in_memory(
        cls,
        *,
        clock: Clock | None = None,
        limits: Limits | None = None,
        retry: RetryPolicy | None = None,
    ) -> Ledger:
        """A private in-process store (SQLite memdb), migrated on first use."""
        memory = MemoryDatabase()
        return cls(
            memory.url(asynchronous=False), clock=clock, limits=limits, retry=retry, _memory=memory
        )

    @property
    def engine(self) -> Engine:
        """The Engine this ledger runs on (its primary's)."""
        return self._runner.engine

    @property
    def primary(self) -> Ledger:
        """This ledger with every read on the primary, for a caller that must see its
        own writes (``ledger.primary.messages.all(id)`` right after an append): the
        same engines, units of work and ``close``. The ledger itself when it has no
        readers."""
        if self._primary is None:
            self._primary = Ledger._on_runner(self._runner, from_readers=False)
        return self._primary

    def langgraph(
        self, *, app_name: str | None = LANGGRAPH_APP_NAME, user_id: str | None = None
    ) -> LangGraphRepository:
        """LangGraph's checkpoints of the threads of one scope (``app_name``,
        ``user_id``: the scope of their sessions' keys), each operation in its own
        transaction: the store under ``agentledger.integrations.langgraph``'s savers."""
        return LangGraphRepository(self._scope, app_name=app_name, user_id=user_id)

    def upgrade(self, revision: str = "head") -> None:
        """Apply agentledger's migrations up to ``revision``."""
        self._runner.check_open()
        migrations.upgrade(self.engine, revision, schema=self.settings.schema)
        self._runner.ready = False

    def close(self) -> None:
        """Release the engine if this ledger created it; a borrowed one is left alone."""
        self._runner.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- what the ledger's own parts use (``_host.Host``) -------------------------------------

    def _transaction(self, *, writes: bool, snapshot: bool = False) -> AbstractContextManager[Work]:
        """A fresh transaction for export, import and purge (``LedgerRunner.transaction``)."""
        return self._runner.transaction(
            writes=writes, snapshot=snapshot, from_reader=self._from_readers
        )

    def _connection(self) -> AbstractContextManager[Connection]:
        """A connection outside any transaction (``LedgerRunner.connection``)."""
        return self._runner.connection()

    # -- units of work ----------------------------------------------------------------------

    @contextmanager
    def unit_of_work(
        self, *, join: Connection | Session | None = None, readonly: bool = False
    ) -> Iterator[UnitOfWork]:
        """One write transaction; with ``join``, a SAVEPOINT in the caller's transaction.

        ``readonly=True``: a read-only transaction that sees one consistent snapshot of
        everything it reads and takes no write locks; a write in it raises UsageError
        before any SQL.
        """
        refuse_if_open(self._runner.key)
        if readonly and join is not None:
            raise ValidationError(
                "a read-only unit of work cannot join a caller's transaction", path="readonly"
            )
        opened = self._runner.new_work(writes=not readonly, join=join, snapshot=readonly)
        with marked_open(self._runner.key), opened as work:
            yield UnitOfWork(work)

    def run(
        self,
        fn: Callable[[UnitOfWork], R],
        *,
        retries: int | None = None,
        retry: RetryPolicy | None = None,
    ) -> R:
        """Run ``fn(uow)`` in a fresh unit of work, again on a retryable error (a stale
        or serialization conflict, a connection lost before the commit) as the retry
        policy says: ``retry``, else the ledger's (``Ledger(retry=...)``); ``retries``
        is the ledger's policy with that many retries (``attempts - 1``). Anything
        else is raised at once: a conflict that cannot succeed, a lock wait that ran
        out, and a commit of unknown outcome (``CommitUnknownError``: ``fn`` is never
        replayed blindly). A retryable error raised because the attempts ran out is
        logged as a warning on ``agentledger.retry``."""
        runner = self._runner
        policy = policy_of_run(lambda: runner.retry_policy, retries=retries, retry=retry)

        def attempt() -> R:
            with self.unit_of_work() as uow:
                return fn(uow)

        return retrying(
            attempt,
            policy=policy,
            retry_on=should_retry,
            sleep=self._waits.sleep,
            what=f"ledger.run({getattr(fn, '__qualname__', 'fn')})",
        )


class AsyncLedger:
    """agentledger's entry point (async API): the same operations as ``Ledger``, awaited.

    Args:
        url: database URL; None means ``AGENTLEDGER_DATABASE_URL``, else
            ``sqlite:///agentledger.db`` in the current folder. A plain ``postgresql://``,
            ``mysql://`` or ``sqlite:///`` URL picks the right async driver.
        engine: an existing AsyncEngine to use instead (it is never disposed here).
        schema: PostgreSQL only: the schema holding agentledger's tables.
        clock: the source of "now" (for tests); must return aware datetimes.
        limits: JSON size and depth limits.
        lock_timeout: seconds a statement waits for a lock before ``DatabaseLockedError``
            (default 15; MariaDB/MySQL round up to whole seconds). A wait that runs out
            is never retried, so this is the longest any lock wait lasts.
        statement_timeout: seconds a statement may run before ``QueryCancelledError``
            (PostgreSQL, MariaDB/MySQL; default: none). Both apply to the engine the
            ledger creates; with ``engine=``, set them on your engine. A dialect
            agentledger was not tested on gets neither, and refuses either given.
        driver_sql: run LangGraph's hot calls as prebuilt statements on the driver's
            connection, past SQLAlchemy's per-statement work (``agentledger._driver``),
            where it can: SQLite and PostgreSQL, on an engine the ledger creates,
            without ``schema``. ``False`` sends every statement through SQLAlchemy.
            SQL logging (``echo``) shows these statements too; with a
            ``before_cursor_execute`` or ``after_cursor_execute`` listener on the
            engine they go through SQLAlchemy, so the listener sees them.
        engine_options: keyword arguments of SQLAlchemy's ``create_engine`` for the
            engine the ledger creates (``pool_size``, ``max_overflow``,
            ``pool_recycle``, ``pool_pre_ping``, ``echo``, ``connect_args``...); the
            ledger's own set-up of that engine (SQLite's pragmas, the timeouts, the
            reset on return, the idle ping unless ``pool_pre_ping`` is given) stays.
            With ``engine=``, configure your engine instead.
        retry: how the ledger runs work again after a failure worth another try (a
            ``RetryPolicy``): its own retry of each ledger-level call after a
            transient failure, and ``run``'s retry of a unit of work. Default: the
            database's budget, 4 attempts (30 on a Galera node the probe finds at
            first use) with full-jitter backoff from 10 ms up to 1 s.
        read_your_writes: on a Galera node, each transaction of the engine the ledger
            creates first waits until the node has applied every write the cluster
            committed before it began (``wsrep_sync_wait = 15``, set on each new
            connection found to be a Galera node), so a read or a revision-checked
            write on one node sees what another acknowledged. ``False`` reads what the
            node has applied (a little faster; a record read stale is still caught as
            a conflict). No effect on one server, or with ``engine=``.
        readers: read replicas (URLs or AsyncEngines) of the primary, PostgreSQL hot
            standbys or Galera nodes: ledger-level reads (gets, listings,
            conversations, usage, export) go to them in turn, a read at a time; writes,
            units of work and ``run`` stay on the primary. A replica may lag: read
            through ``ledger.primary`` where a caller must see its own write (the
            framework stores do). A reader that cannot be reached is skipped for a
            few seconds, its reads going to the others or to the primary. A URL's
            engine is made like the primary's (``engine_options``, timeouts).
    """

    def __init__(
        self,
        url: str | URL | None = None,
        *,
        engine: AsyncEngine | None = None,
        schema: str | None = None,
        clock: Clock | None = None,
        limits: Limits | None = None,
        lock_timeout: float | None = None,
        statement_timeout: float | None = None,
        driver_sql: bool = True,
        engine_options: Mapping[str, Any] | None = None,
        retry: RetryPolicy | None = None,
        read_your_writes: bool = True,
        readers: Sequence[str | URL | AsyncEngine] | None = None,
        _memory: MemoryDatabase | None = None,
    ) -> None:
        _check_options(url, engine, clock, limits, driver_sql, read_your_writes)
        replicas = _checked_readers(readers, AsyncEngine)
        policy = checked_policy(retry)
        options = _checked_engine_options(engine, engine_options)
        timeouts = _checked_timeouts(engine, lock_timeout, statement_timeout)
        timeouts["cluster_sync_wait"] = read_your_writes
        if engine is not None and not isinstance(engine, AsyncEngine):
            raise ValidationError(
                f"AsyncLedger takes an AsyncEngine, got {type(engine).__name__}; "
                "use Ledger with a sync Engine",
                path="engine",
            )
        twin = None
        make: Callable[[], AsyncEngine] | None = None
        if engine is None:
            make = _async_engine_maker(url, options, timeouts)
            self._engine = make()
            twin = None if _memory is not None else create_sqlite_twin(self._engine)
            if twin is not None:
                configure_timeouts(twin, **timeouts)
        else:
            check_supported(engine.sync_engine)
            self._engine = engine
        reader_engines = []
        for reader in _no_readers_on_sqlite(self._engine.sync_engine, replicas):
            if isinstance(reader, AsyncEngine):
                check_supported(reader.sync_engine)
                reader_engines.append(EnginePerLoop(reader, make=None))
            else:
                make_reader = _async_engine_maker(reader, options, timeouts)
                reader_engines.append(EnginePerLoop(make_reader(), make=make_reader))
            check_replica(
                self._engine.sync_engine, reader_engines[-1].main, len(reader_engines) - 1
            )
        settings = _settings(self._engine.sync_engine, schema, clock, limits)
        proxied = Ledger._on_runner(
            LedgerRunner(
                EnginePerLoop(self._engine, make=make),
                settings,
                owns_engine=engine is None,
                memory=_memory,
                waits=GREENLET,
                session_factory=_session_behind_async_session,
                driver_sql=driver_sql,
                retry=policy,
                readers=Readers(reader_engines),
            )
        )
        self._twin: Ledger | None = None
        self._hop: ThreadHop | None = None
        if twin is not None:
            self._twin = Ledger._on_runner(
                LedgerRunner(
                    OneEngine(twin, owned=True),
                    settings,
                    owns_engine=True,
                    memory=None,
                    waits=BLOCKING,
                    session_factory=Session,
                    driver_sql=driver_sql,
                    retry=policy,
                )
            )
            self._hop = ThreadHop(self._before_hop, workers=TWIN_THREADS, name="agentledger-sqlite")
        self._face(proxied)

    def _face(self, proxied: Ledger) -> None:
        """The async repositories in front of ``proxied``'s, or of the SQLite twin's."""
        self.sync_ledger = proxied
        """The sync ledger on this engine's ``sync_engine``: units of work, ``run``,
        transfer and retention are handed to it (and, without a twin, every call)."""
        self.settings = proxied.settings
        """The configuration every transaction of this ledger shares."""
        self._primary: AsyncLedger | None = self if proxied.primary is proxied else None
        calls, run = self._ledger_calls()
        self.sessions = AsyncSessionRepository(calls.sessions, run)
        """Session operations, each in its own transaction."""
        self.messages = AsyncMessageRepository(calls.messages, run)
        """Message operations, each in its own transaction."""
        self.steps = AsyncStepRepository(calls.steps, run)
        """Step operations, each in its own transaction."""
        self.grants = AsyncGrantRepository(calls.grants, run)
        """Grant operations, each in its own transaction."""
        self.checkpoints = AsyncCheckpointRepository(calls.checkpoints, run)
        """Checkpoint operations, each in its own transaction."""
        self.app_state = AsyncAppStateRepository(calls.app_state, run)
        """App state operations (state shared by an application's sessions)."""
        self.user_state = AsyncUserStateRepository(calls.user_state, run)
        """User state operations (state shared by one user's sessions of an application)."""
        self.memory = AsyncMemoryRepository(calls.memory, run)
        """Long-term memory: items under namespaces, kept across sessions."""
        self.transfer = AsyncTransfer(proxied.transfer)
        """Export to JSON Lines, import, and copy to another ledger."""
        self.retention = AsyncRetention(proxied.retention)
        """Purge what is past keeping; on SQLite, vacuum."""

    @classmethod
    def in_memory(
        cls,
        *,
        clock: Clock | None = None,
        limits: Limits | None = None,
        retry: RetryPolicy | None = None,
    ) -> AsyncLedger:
        """A private in-process store (SQLite memdb), migrated on first use."""
        memory = MemoryDatabase()
        return cls(
            memory.url(asynchronous=True), clock=clock, limits=limits, retry=retry, _memory=memory
        )

    @property
    def engine(self) -> AsyncEngine:
        """The AsyncEngine this ledger runs on (its primary's)."""
        return self._engine

    @property
    def primary(self) -> AsyncLedger:
        """This ledger with every read on the primary, for a caller that must see its
        own writes (``await ledger.primary.messages.all(id)`` right after an append):
        the same engines, units of work and ``close``. The ledger itself when it has no
        readers."""
        if self._primary is None:
            face = AsyncLedger.__new__(AsyncLedger)
            face._engine, face._twin, face._hop = self._engine, None, None
            face._face(self.sync_ledger.primary)
            self._primary = face
        return self._primary

    def langgraph(
        self, *, app_name: str | None = LANGGRAPH_APP_NAME, user_id: str | None = None
    ) -> AsyncLangGraphRepository:
        """LangGraph's checkpoints of the threads of one scope (``app_name``,
        ``user_id``: the scope of their sessions' keys), each operation in its own
        transaction: the store under ``agentledger.integrations.langgraph``'s savers."""
        calls, run = self._ledger_calls()
        return AsyncLangGraphRepository(calls.langgraph(app_name=app_name, user_id=user_id), run)

    @asynccontextmanager
    async def unit_of_work(
        self, *, join: AsyncConnection | AsyncSession | None = None, readonly: bool = False
    ) -> AsyncIterator[AsyncUnitOfWork]:
        """One write transaction; with ``join``, a SAVEPOINT in the caller's transaction.

        ``readonly=True``: a read-only transaction that sees one consistent snapshot of
        everything it reads and takes no write locks; a write in it raises UsageError
        before any SQL.
        """
        opening = self.sync_ledger.unit_of_work(join=_sync_join(join), readonly=readonly)
        async with async_context(opening) as uow:
            yield AsyncUnitOfWork(uow)

    async def run(
        self,
        fn: Callable[[AsyncUnitOfWork], Awaitable[R]],
        *,
        retries: int | None = None,
        retry: RetryPolicy | None = None,
    ) -> R:
        """Run ``await fn(uow)`` in a fresh unit of work, again on a retryable error (a
        stale or serialization conflict, a connection lost before the commit) as the
        retry policy says: ``retry``, else the ledger's (``AsyncLedger(retry=...)``);
        ``retries`` is the ledger's policy with that many retries (``attempts - 1``).
        Anything else is raised at once: a conflict that cannot succeed, a lock wait
        that ran out, and a commit of unknown outcome (``CommitUnknownError``: ``fn``
        is never replayed blindly). A retryable error raised because the attempts ran
        out is logged as a warning on ``agentledger.retry``."""

        def attempt(uow: UnitOfWork) -> R:
            return await_(fn(AsyncUnitOfWork(uow)))

        # The retry warnings name the caller's function, not this wrapper.
        attempt.__qualname__ = getattr(fn, "__qualname__", "fn")
        return await spawn(self.sync_ledger.run, attempt, retries=retries, retry=retry)

    async def __aenter__(self) -> AsyncLedger:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def upgrade(self, revision: str = "head") -> None:
        """Apply agentledger's migrations up to ``revision``."""
        await spawn(self.sync_ledger.upgrade, revision)
        if self._twin is not None:
            self._twin._runner.ready = False  # it checks the schema again at its next call

    async def close(self) -> None:
        """Release the engine if this ledger created it; a borrowed one is left alone."""
        closed = self.sync_ledger._runner.closed
        await spawn(self.sync_ledger.close)
        if self._hop is not None and self._twin is not None and not closed:
            # After the calls running in the threads end; later ones are refused first.
            await asyncio.to_thread(_close_twin, self._hop, self._twin)

    def _ledger_calls(self) -> tuple[Ledger, Runner]:
        """The sync ledger ledger-level calls run on and how they are run: the twin in
        a thread hop, or (without one) ``sync_ledger`` in a greenlet."""
        if self._twin is not None and self._hop is not None:
            return self._twin, self._hop
        return self.sync_ledger, in_greenlet

    def _before_hop(self) -> None:
        """In the event loop, before a ledger-level call's thread hop: refused when this
        ledger is closed, or inside an open unit of work of the calling task."""
        self.sync_ledger._runner.check_open()
        refuse_if_open(self.sync_ledger._runner.key)


TWIN_THREADS = 4
"""Worker threads of an async ledger's SQLite twin: SQLite runs one writer at a time
and WAL readers alongside it, so a few threads keep it busy; more would only wait."""


def _close_twin(hop: ThreadHop, twin: Ledger) -> None:
    hop.close()
    twin.close()


def _check_options(
    url: object,
    engine: object,
    clock: object,
    limits: object,
    driver_sql: object,
    read_your_writes: object,
) -> None:
    if url is not None and engine is not None:
        raise ValidationError("give a url or an engine, not both", path="engine")
    if limits is not None and not isinstance(limits, Limits):
        raise ValidationError("limits must be an agentledger.Limits", path="limits")
    if clock is not None and not callable(clock):
        raise ValidationError("clock must be a callable returning an aware datetime")
    for name, flag in (("driver_sql", driver_sql), ("read_your_writes", read_your_writes)):
        if not isinstance(flag, bool):
            raise ValidationError(f"{name} must be True or False, got {flag!r}", path=name)


def _checked_engine_options(engine: object, options: object) -> dict[str, Any]:
    """``engine_options`` as keyword arguments; refused when not a mapping of names, or
    given with a borrowed engine."""
    if options is None:
        return {}
    if engine is not None:
        raise ValidationError(
            "engine_options configure the engine a ledger creates; with engine=, create "
            "your engine with them",
            path="engine_options",
        )
    if not isinstance(options, Mapping) or not all(isinstance(key, str) for key in options):
        raise ValidationError(
            f"engine_options must be a mapping of create_engine's keyword arguments, got "
            f"{options!r}",
            path="engine_options",
        )
    return dict(options)


E = TypeVar("E")


def _async_engine_maker(
    url: str | URL | None, options: dict[str, Any], timeouts: dict[str, Any]
) -> Callable[[], AsyncEngine]:
    """Makes the AsyncEngines of an async ledger's database: the first, and one per
    further event loop (``EnginePerLoop``), each with the ledger's timeouts."""

    def make() -> AsyncEngine:
        made = _created(create_async_engine_for, url, options)
        configure_timeouts(made.sync_engine, **timeouts)
        return made

    return make


def _checked_readers(readers: object, engine_type: type) -> list[Any]:
    """``readers`` as a list of URLs and engines of ``engine_type``; refused when not a
    list of them (a lone URL string is refused rather than read letter by letter)."""
    if readers is None:
        return []
    kind = engine_type.__name__
    if isinstance(readers, str | URL | Engine | AsyncEngine) or not isinstance(
        readers, list | tuple
    ):
        raise ValidationError(
            f"readers must be a list of database URLs or {kind}s, got {readers!r}",
            path="readers",
        )
    for index, reader in enumerate(readers):
        if not isinstance(reader, str | URL | engine_type):
            other = "Ledger" if engine_type is AsyncEngine else "AsyncLedger"
            hint = (
                f" (an {type(reader).__name__} belongs to {other})"
                if isinstance(reader, Engine | AsyncEngine)
                else ""
            )
            raise ValidationError(
                f"readers[{index}] must be a database URL or an {kind}, got "
                f"{type(reader).__name__}{hint}",
                path=f"readers[{index}]",
            )
    return list(readers)


def _no_readers_on_sqlite(engine: Engine, readers: list[Any]) -> list[Any]:
    """``readers``, refused on SQLite, whose file has no replicas to read from."""
    if readers and capabilities(engine.dialect).single_file:
        raise ValidationError(
            "readers= are replicas of a database server (PostgreSQL standbys, Galera or "
            "MariaDB/MySQL replicas); a SQLite file has none",
            path="readers",
        )
    return readers


def _created(create: Callable[..., E], url: str | URL | None, options: dict[str, Any]) -> E:
    """``create(url, **options)``, an option SQLAlchemy refuses said as a ValidationError."""
    if not options:
        return create(url)
    try:
        return create(url, **options)
    except (TypeError, sa_exc.ArgumentError) as error:
        raise ValidationError(
            f"engine_options: SQLAlchemy refused them: {error}",
            path="engine_options",
        ) from None


def _settings(
    engine: Engine, schema: str | None, clock: Clock | None, limits: Limits | None
) -> Settings:
    """What every transaction of a ledger on ``engine`` shares."""
    return Settings(
        url=engine.url,
        clock=clock or system_clock,
        limits=limits or Limits(),
        schema=validate_schema(schema, engine.dialect.name),
    )


def _checked_timeouts(
    engine: object, lock_timeout: object, statement_timeout: object
) -> dict[str, Any]:
    """The timeouts for ``configure_timeouts``; refused when not a positive number of
    seconds, or given with a borrowed engine (whose connections are the caller's)."""
    for name, value in (("lock_timeout", lock_timeout), ("statement_timeout", statement_timeout)):
        if value is None:
            continue
        if engine is not None:
            raise ValidationError(
                f"{name} applies to the engine a ledger creates; with engine=, set it on "
                "your engine's connections",
                path=name,
            )
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 < value <= MAX_TIMEOUT_S
        ):
            raise ValidationError(
                f"{name} must be a number of seconds above 0 and at most {MAX_TIMEOUT_S}, "
                f"got {value!r}",
                path=name,
            )
    return {"lock_timeout": lock_timeout, "statement_timeout": statement_timeout}


def _session_behind_async_session(*, bind: Engine | Connection, **options: Any) -> Session:
    """The sync Session of a new AsyncSession on ``bind``, which it keeps in its ``info``
    for ``AsyncUnitOfWork.session``."""
    if isinstance(bind, Engine):
        front = AsyncSession(bind=AsyncEngine(bind), **options)
    else:
        front = AsyncSession(bind=AsyncConnection(AsyncEngine(bind.engine), bind), **options)
    front.sync_session.info[ASYNC_SESSION_KEY] = front
    return front.sync_session


def _sync_join(join: AsyncConnection | AsyncSession | None) -> Connection | Session | None:
    if join is None:
        return None
    if isinstance(join, AsyncSession):
        return join.sync_session
    if isinstance(join, AsyncConnection):
        return join.sync_connection
    raise ValidationError(
        f"join= takes an AsyncConnection or an AsyncSession, got {type(join).__name__}",
        path="join",
    )
