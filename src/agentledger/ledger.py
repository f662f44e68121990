"""Ledger (the sync core) and AsyncLedger (its async face): the entry points of the API.

``Ledger`` owns everything: the engine, the one session factory, readiness (the
schema check and capability probe at first use), the retry of transient failures,
units of work and the repositories. ``AsyncLedger`` holds a ``Ledger`` built on its
AsyncEngine's ``sync_engine`` (as ``AsyncEngine`` holds an ``Engine``) and hands every
call to it in one greenlet hop, where the async driver's I/O is awaited.

On a SQLite file whose engine it created, an ``AsyncLedger`` also holds a second
``Ledger`` on a sync twin engine (pysqlite, the same file and set-up, the same
``Settings``) and runs each ledger-level call (``ledger.messages.append(...)``) as one
call of it in one worker-thread hop: aiosqlite makes a hop per cursor call (about eight
per append). Units of work and ``run`` stay on the AsyncEngine: a unit of work holds the
write lock across awaits, and threads waiting on it would starve the pool.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession
from sqlalchemy.orm import Session

from . import _driver, migrations
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
from ._json import Limits
from ._probe import probe
from ._retry import (
    TRANSIENT_RETRIES,
    is_lost_before_commit,
    retrying,
    should_retry,
    transient_or_replayable,
)
from ._translate import translated, translated_commit
from .clock import Clock, system_clock
from .engine import (
    DEFAULT_LOCK_TIMEOUT_S,
    MemoryDatabase,
    check_borrowed_sqlite,
    check_supported,
    configure_timeouts,
    create_async_engine_for,
    create_sqlite_twin,
    create_sync_engine,
    is_read_only,
    mask,
    read_only_options,
    repair_aiomysql_bytes,
    validate_schema,
)
from .errors import (
    AgentLedgerError,
    DatabaseError,
    PermissionDeniedError,
    UsageError,
    ValidationError,
)
from .langgraph_records import LANGGRAPH_APP_NAME
from .repositories import (
    AppStateRepository,
    AsyncAppStateRepository,
    AsyncCheckpointRepository,
    AsyncGrantRepository,
    AsyncLangGraphRepository,
    AsyncMessageRepository,
    AsyncSessionRepository,
    AsyncStepRepository,
    AsyncUserStateRepository,
    CheckpointRepository,
    GrantRepository,
    LangGraphRepository,
    MessageRepository,
    SessionRepository,
    StepRepository,
    UserStateRepository,
)
from .repositories._base import NOT_ON_DRIVER, Settings, Work
from .repositories._statements import snapshot_read_options
from .retention import AsyncRetention, Retention
from .transfer import AsyncTransfer, Transfer
from .uow import ASYNC_SESSION_KEY, AsyncUnitOfWork, UnitOfWork

R = TypeVar("R")
_keys = itertools.count(1)
SessionFactory = Callable[..., Session]
"""Makes the ORM Session of a unit of work from a bind and Session options."""


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
            ledger creates; with ``engine=``, set them on your engine.
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
        _memory: MemoryDatabase | None = None,
    ) -> None:
        _check_options(url, engine, clock, limits)
        timeouts = _checked_timeouts(engine, lock_timeout, statement_timeout)
        if engine is not None and not isinstance(engine, Engine):
            raise ValidationError(
                f"Ledger takes a sync Engine, got {type(engine).__name__}; "
                "use AsyncLedger with an AsyncEngine",
                path="engine",
            )
        if engine is None:
            engine = create_sync_engine(url)
            configure_timeouts(engine, **timeouts)
            owns_engine = True
        else:
            check_supported(engine)
            owns_engine = False
        self._setup(
            engine,
            owns_engine=owns_engine,
            schema=schema,
            clock=clock,
            limits=limits,
            memory=_memory,
            waits=BLOCKING,
            session_factory=Session,
        )

    def _setup(
        self,
        engine: Engine,
        *,
        owns_engine: bool,
        schema: str | None,
        clock: Clock | None,
        limits: Limits | None,
        memory: MemoryDatabase | None,
        waits: Waits,
        session_factory: SessionFactory,
        settings: Settings | None = None,
    ) -> None:
        self._engine = engine
        self._owns_engine = owns_engine
        self._memory = memory
        self._waits = waits
        self._session_factory = session_factory
        self._key = next(_keys)
        self._ready = False
        self._ready_lock = waits.lock()
        self._closed = False
        self._read_options: dict[str, Any] = {}
        self.settings = settings or Settings(
            url=engine.url,
            clock=clock or system_clock,
            limits=limits or Limits(),
            schema=validate_schema(schema, engine.dialect.name),
        )
        """The configuration every transaction of this ledger shares."""
        self._bind = self._binds()
        self.sessions = SessionRepository(self)
        """Session operations, each in its own transaction."""
        self.messages = MessageRepository(self)
        """Message operations, each in its own transaction."""
        self.steps = StepRepository(self)
        """Step operations, each in its own transaction."""
        self.grants = GrantRepository(self)
        """Grant operations, each in its own transaction."""
        self.checkpoints = CheckpointRepository(self)
        """Checkpoint operations, each in its own transaction."""
        self.app_state = AppStateRepository(self)
        """App state operations (state shared by an application's sessions)."""
        self.user_state = UserStateRepository(self)
        """User state operations (state shared by one user's sessions of an application)."""
        self.transfer = Transfer(self)
        """Export to JSON Lines, import, and copy to another ledger."""
        self.retention = Retention(self)
        """Purge what is past keeping; on SQLite, vacuum."""

    @classmethod
    def in_memory(cls, *, clock: Clock | None = None, limits: Limits | None = None) -> Ledger:
        """A private in-process store (SQLite memdb), migrated on first use."""
        memory = MemoryDatabase()
        return cls(memory.url(asynchronous=False), clock=clock, limits=limits, _memory=memory)

    @property
    def engine(self) -> Engine:
        """The Engine this ledger runs on."""
        return self._engine

    def langgraph(
        self, *, app_name: str | None = LANGGRAPH_APP_NAME, user_id: str | None = None
    ) -> LangGraphRepository:
        """LangGraph's checkpoints of the threads of one scope (``app_name``,
        ``user_id``: the scope of their sessions' keys), each operation in its own
        transaction: the store under ``agentledger.integrations.langgraph``'s savers."""
        return LangGraphRepository(self, app_name=app_name, user_id=user_id)

    # -- lifecycle ------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError("this ledger is closed")

    def _ensure_ready(self) -> None:
        """First use: refuse what cannot work, check (or, in memory, build) the schema,
        then probe what conflict detection and exact round trips rely on."""
        self._check_open()
        if self._ready:
            return
        with self._ready_lock:
            if self._ready:
                return
            with translated(self.settings.url), self._engine.connect() as connection:
                self._prepare(connection)
                if connection.in_transaction():
                    connection.commit()
            self._bind = self._binds()
            self._ready = True

    def _prepare(self, connection: Connection) -> None:
        if not connection.dialect.supports_sane_rowcount:
            raise DatabaseError(
                f"the {connection.dialect.name} driver {connection.dialect.driver} cannot "
                "report how many rows an UPDATE matched, so concurrent writers could not "
                "be detected; use a driver that can"
            )
        schema = self.settings.schema
        if self._memory is not None:
            migrations.upgrade(connection, schema=schema)
        else:
            migrations.check(connection, schema=schema)
        check_borrowed_sqlite(connection)
        repair_aiomysql_bytes(connection.dialect)
        probe(connection)
        self._read_options = read_only_options(connection)

    def _binds(self) -> dict[str, Engine]:
        """The engine with the options of owned write, read and snapshot transactions."""
        options = self.settings.execution_options
        engine = self._engine
        return {
            "write": engine.execution_options(**options(writes=True)),
            "read": engine.execution_options(**options(writes=False), **self._read_options),
            "snapshot": engine.execution_options(
                **options(writes=False), **snapshot_read_options(engine.dialect.name)
            ),
        }

    def upgrade(self, revision: str = "head") -> None:
        """Apply agentledger's migrations up to ``revision``."""
        self._check_open()
        migrations.upgrade(self._engine, revision, schema=self.settings.schema)
        self._ready = False

    def close(self) -> None:
        """Release the engine if this ledger created it; a borrowed one is left alone."""
        if self._closed:
            return
        self._closed = True
        if self._owns_engine:
            self._engine.dispose()
        if self._memory is not None:
            self._memory.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- transactions ---------------------------------------------------------------------

    def _new_work(
        self,
        *,
        writes: bool,
        join: Connection | Session | None = None,
        session_factory: SessionFactory | None = None,
        snapshot: bool = False,
    ) -> Work:
        """A transaction, not begun yet. A unit of work's Session comes from the ledger's
        session factory (the async API puts an AsyncSession in front of it); a single
        operation's is a plain Session. ``snapshot``: a read-only transaction that sees
        one consistent snapshot."""
        self._ensure_ready()
        if writes and join is None and is_read_only(self.settings.url):
            raise PermissionDeniedError(
                f"{mask(self.settings.url)} is opened read-only: this process cannot "
                "write the SQLite file or its folder (read-only media?), so it can only "
                "be read"
            )
        make_session = session_factory or self._session_factory
        options: dict[str, Any] = {"expire_on_commit": False, "autoflush": False}
        if join is None:
            bind = self._bind["write" if writes else "snapshot" if snapshot else "read"]
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

    def _perform(self, writes: bool, call: Callable[[Work], R], snapshot: bool = False) -> R:
        """Run one repository operation in a fresh transaction of its own, again after
        a transient failure (a deadlock, a lock refused at once, a stale statement
        cache) or a connection lost before its COMMIT was sent (nothing of it was
        stored: a pooled connection the server dropped, which the idle-only pre-ping let
        through), and after a commit of unknown outcome only when the operation said its
        replay is harmless (``Work.replay_safe``)."""
        refuse_if_open(self._key)
        begun: list[Work] = []  # the attempt's transaction, once it exists

        def attempt() -> R:
            begun.clear()
            begun.append(self._new_work(writes=writes, snapshot=snapshot, session_factory=Session))
            begun[0].one_operation = True
            with begun[0] as work:
                return work._perform(writes, call)

        return self._retried(
            attempt,
            lost_before_commit=lambda error: (
                bool(begun) and is_lost_before_commit(error, begun[0].commit_sent)
            ),
            replay_safe=lambda: bool(begun) and begun[0].replay_safe,
        )

    def _perform_on_driver(self, writes: bool, call: Callable[[Work], R]) -> R | object:
        """``_perform`` on driver SQL (``_driver``), without an ORM Session: for the hot
        calls whose statements are all prebuilt, on this ledger's own engine when it can
        take them. The same checks, retries and error translation; ``NOT_ON_DRIVER``
        when the call must run through ``_perform`` instead (nothing of it stored)."""
        if not self._owns_engine or not _driver.usable(self._engine, schema=self.settings.schema):
            return NOT_ON_DRIVER
        refuse_if_open(self._key)
        self._ensure_ready()
        if writes and is_read_only(self.settings.url):
            return NOT_ON_DRIVER  # _perform says why it cannot
        url = self.settings.url
        autocommit = _driver.driver_one_statement(
            self._engine.dialect, self._read_options, writes=writes
        )
        begun: list[Work] = []
        sent = [False]

        def attempt() -> R | object:
            begun.clear()
            sent[0] = False
            driver: _driver.DriverConnection | None = None
            try:
                with _driver.transaction(
                    self._engine, writes=writes, autocommit=autocommit, url=url
                ) as driver:
                    work = Work(None, self.settings, writes=writes, joined=False, driver=driver)
                    work.one_operation = work.active = True
                    begun.append(work)
                    result = work._perform(writes, call)
                return result
            except _driver.Fallback:
                return NOT_ON_DRIVER
            except Exception as error:
                sent[0] = writes and driver is not None and driver.commit_sent
                if isinstance(error, AgentLedgerError):
                    raise
                with translated_commit(url) if sent[0] and writes else translated(url):
                    raise

        return self._retried(
            attempt,
            lost_before_commit=lambda error: is_lost_before_commit(error, sent[0]),
            replay_safe=lambda: bool(begun) and begun[0].replay_safe,
        )

    def _retried(
        self,
        attempt: Callable[[], R],
        *,
        lost_before_commit: Callable[[BaseException], bool],
        replay_safe: Callable[[], bool],
    ) -> R:
        """The retry of one ledger-level call (``_perform`` and its driver twin): again
        after ``lost_before_commit(error)``, a transient failure, or a commit of unknown
        outcome when ``replay_safe()``."""
        replayable = transient_or_replayable(replay_safe)
        return retrying(
            attempt,
            retries=TRANSIENT_RETRIES,
            retry_on=lambda error: lost_before_commit(error) or replayable(error),
            sleep=self._waits.sleep,
        )

    @contextmanager
    def _transaction(self, *, writes: bool, snapshot: bool = False) -> Iterator[Work]:
        """A fresh transaction for the ledger's own parts (export, import, purge), which
        bind the repositories they need to it; ``snapshot``: a read that sees one
        snapshot however long it lasts."""
        refuse_if_open(self._key)
        with self._new_work(writes=writes, snapshot=snapshot, session_factory=Session) as work:
            yield work

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        """A connection outside any transaction, rolled back after (SQLite's VACUUM)."""
        refuse_if_open(self._key)
        self._ensure_ready()
        with translated(self.settings.url), self._engine.connect() as connection:
            yield connection
            if connection.in_transaction():
                connection.rollback()

    @contextmanager
    def unit_of_work(
        self, *, join: Connection | Session | None = None, readonly: bool = False
    ) -> Iterator[UnitOfWork]:
        """One write transaction; with ``join``, a SAVEPOINT in the caller's transaction.

        ``readonly=True``: a read-only transaction that sees one consistent snapshot of
        everything it reads and takes no write locks; a write in it raises UsageError
        before any SQL.
        """
        refuse_if_open(self._key)
        if readonly and join is not None:
            raise ValidationError(
                "a read-only unit of work cannot join a caller's transaction", path="readonly"
            )
        opened = self._new_work(writes=not readonly, join=join, snapshot=readonly)
        with marked_open(self._key), opened as work:
            yield UnitOfWork(work)

    def run(self, fn: Callable[[UnitOfWork], R], *, retries: int = 3) -> R:
        """Run ``fn(uow)`` in a fresh unit of work, again on a retryable error (a stale
        or serialization conflict, a connection lost before the commit), up to
        ``retries`` more times with jittered backoff. Anything else is raised at once:
        a conflict that cannot succeed, a lock wait that ran out, and a commit of
        unknown outcome (``CommitUnknownError``: ``fn`` is never replayed blindly)."""

        def attempt() -> R:
            with self.unit_of_work() as uow:
                return fn(uow)

        return retrying(attempt, retries=retries, retry_on=should_retry, sleep=self._waits.sleep)


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
            ledger creates; with ``engine=``, set them on your engine.
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
        _memory: MemoryDatabase | None = None,
    ) -> None:
        _check_options(url, engine, clock, limits)
        timeouts = _checked_timeouts(engine, lock_timeout, statement_timeout)
        if engine is not None and not isinstance(engine, AsyncEngine):
            raise ValidationError(
                f"AsyncLedger takes an AsyncEngine, got {type(engine).__name__}; "
                "use Ledger with a sync Engine",
                path="engine",
            )
        twin = None
        if engine is None:
            self._engine = create_async_engine_for(url)
            configure_timeouts(self._engine.sync_engine, **timeouts)
            twin = None if _memory is not None else create_sqlite_twin(self._engine)
            if twin is not None:
                configure_timeouts(twin, **timeouts)
        else:
            check_supported(engine.sync_engine)
            self._engine = engine
        proxied = Ledger.__new__(Ledger)
        proxied._setup(
            self._engine.sync_engine,
            owns_engine=engine is None,
            schema=schema,
            clock=clock,
            limits=limits,
            memory=_memory,
            waits=GREENLET,
            session_factory=_session_behind_async_session,
        )
        self.sync_ledger = proxied
        """The sync ledger on this engine's ``sync_engine``: units of work, ``run``,
        transfer and retention are handed to it (and, without a twin, every call)."""
        self.settings = proxied.settings
        """The configuration every transaction of this ledger shares."""
        self._twin: Ledger | None = None
        self._hop: ThreadHop | None = None
        calls, run = proxied, in_greenlet
        if twin is not None:
            calls = self._twin = Ledger.__new__(Ledger)
            self._twin._setup(
                twin,
                owns_engine=True,
                schema=schema,
                clock=clock,
                limits=limits,
                memory=None,
                waits=BLOCKING,
                session_factory=Session,
                settings=proxied.settings,
            )
            run = self._hop = ThreadHop(
                self._before_hop, workers=TWIN_THREADS, name="agentledger-sqlite"
            )
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
        self.transfer = AsyncTransfer(proxied.transfer)
        """Export to JSON Lines, import, and copy to another ledger."""
        self.retention = AsyncRetention(proxied.retention)
        """Purge what is past keeping; on SQLite, vacuum."""

    @classmethod
    def in_memory(cls, *, clock: Clock | None = None, limits: Limits | None = None) -> AsyncLedger:
        """A private in-process store (SQLite memdb), migrated on first use."""
        memory = MemoryDatabase()
        return cls(memory.url(asynchronous=True), clock=clock, limits=limits, _memory=memory)

    @property
    def engine(self) -> AsyncEngine:
        """The AsyncEngine this ledger runs on."""
        return self._engine

    def langgraph(
        self, *, app_name: str | None = LANGGRAPH_APP_NAME, user_id: str | None = None
    ) -> AsyncLangGraphRepository:
        """LangGraph's checkpoints of the threads of one scope (``app_name``,
        ``user_id``: the scope of their sessions' keys), each operation in its own
        transaction: the store under ``agentledger.integrations.langgraph``'s savers."""
        host, run = self._ledger_calls()
        return AsyncLangGraphRepository(
            LangGraphRepository(host, app_name=app_name, user_id=user_id), run
        )

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

    async def run(self, fn: Callable[[AsyncUnitOfWork], Awaitable[R]], *, retries: int = 3) -> R:
        """Run ``await fn(uow)`` in a fresh unit of work, again on a retryable error (a
        stale or serialization conflict, a connection lost before the commit), up to
        ``retries`` more times with jittered backoff. Anything else is raised at once:
        a conflict that cannot succeed, a lock wait that ran out, and a commit of
        unknown outcome (``CommitUnknownError``: ``fn`` is never replayed blindly)."""
        return await spawn(
            self.sync_ledger.run, lambda uow: await_(fn(AsyncUnitOfWork(uow))), retries=retries
        )

    async def __aenter__(self) -> AsyncLedger:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def upgrade(self, revision: str = "head") -> None:
        """Apply agentledger's migrations up to ``revision``."""
        await spawn(self.sync_ledger.upgrade, revision)
        if self._twin is not None:
            self._twin._ready = False  # it checks the schema again at its next call

    async def close(self) -> None:
        """Release the engine if this ledger created it; a borrowed one is left alone."""
        closed = self.sync_ledger._closed
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
        self.sync_ledger._check_open()
        refuse_if_open(self.sync_ledger._key)


TWIN_THREADS = 4
"""Worker threads of an async ledger's SQLite twin: SQLite runs one writer at a time
and WAL readers alongside it, so a few threads keep it busy; more would only wait."""


def _close_twin(hop: ThreadHop, twin: Ledger) -> None:
    hop.close()
    twin.close()


def _check_options(url: object, engine: object, clock: object, limits: object) -> None:
    if url is not None and engine is not None:
        raise ValidationError("give a url or an engine, not both", path="engine")
    if limits is not None and not isinstance(limits, Limits):
        raise ValidationError("limits must be an agentledger.Limits", path="limits")
    if clock is not None and not callable(clock):
        raise ValidationError("clock must be a callable returning an aware datetime")


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
    return {
        "lock_timeout": DEFAULT_LOCK_TIMEOUT_S if lock_timeout is None else lock_timeout,
        "statement_timeout": statement_timeout,
    }


MAX_TIMEOUT_S = 86_400
"""The longest lock or statement timeout a ledger takes: one day."""


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
