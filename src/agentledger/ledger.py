"""AsyncLedger (primary) and Ledger (its sync twin): the entry points of the API.

Both build the same ``Work`` objects and run the same repository code; the sync
ledger calls it directly, the async one through ``AsyncSession.run_sync`` (one
greenlet hop per operation). What differs is only engines and awaiting.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession
from sqlalchemy.orm import Session

from . import migrations
from ._json import Limits
from ._probe import probe
from ._retry import backoff_delays, retrying, retrying_async, should_retry
from ._translate import translated
from .clock import Clock, system_clock
from .engine import (
    MemoryDatabase,
    check_borrowed_sqlite,
    create_async_engine_for,
    create_sync_engine,
    read_only_options,
    validate_schema,
)
from .errors import DatabaseError, UsageError, ValidationError
from .repositories import (
    AsyncCheckpointRepository,
    AsyncGrantRepository,
    AsyncMessageRepository,
    AsyncSessionRepository,
    AsyncStepRepository,
    CheckpointsOnLedger,
    GrantsOnLedger,
    MessagesOnLedger,
    SessionsOnLedger,
    StepsOnLedger,
)
from .uow import Settings, UnitOfWork, Work, marked_open, refuse_if_open

R = TypeVar("R")
E = TypeVar("E", Engine, AsyncEngine)
_keys = itertools.count(1)


class _LedgerBase:
    """What both ledgers share: configuration, the schema check, ownership."""

    def __init__(
        self,
        url: str | URL | None,
        engine: Engine | AsyncEngine | None,
        schema: str | None,
        clock: Clock | None,
        limits: Limits | None,
        memory: MemoryDatabase | None,
    ) -> None:
        if url is not None and engine is not None:
            raise ValidationError("give a url or an engine, not both", path="engine")
        if limits is not None and not isinstance(limits, Limits):
            raise ValidationError("limits must be an agentledger.Limits", path="limits")
        if clock is not None and not callable(clock):
            raise ValidationError("clock must be a callable returning an aware datetime")
        self._key = next(_keys)
        self._memory = memory
        self._owns_engine = engine is None
        self._ready = False
        self._closed = False
        self._pending_schema = schema
        self._read_options = {}
        self._clock = clock or system_clock
        self._limits = limits or Limits()

    def _settings_for(self, url: URL, dialect_name: str) -> Settings:
        schema = validate_schema(self._pending_schema, dialect_name)
        return Settings(url=url, clock=self._clock, limits=self._limits, schema=schema)

    def _prepare(self, connection: Connection) -> None:
        """First use: refuse what cannot work, check (or, in memory, build) the schema,
        then probe what conflict detection and exact round trips rely on."""
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
        probe(connection)
        self._read_options = read_only_options(connection)

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError("this ledger is closed")

    def _binds(self, engine: E) -> dict[bool, E]:
        """The engine with the options of owned write and read-only units of work."""
        return {
            True: engine.execution_options(**self.settings.execution_options(writes=True)),
            False: engine.execution_options(
                **self.settings.execution_options(writes=False), **self._read_options
            ),
        }

    settings: Settings
    _read_options: dict[str, Any]


class Ledger(_LedgerBase):
    """The sync twin of AsyncLedger: the same names, the same behaviour, no awaiting.

    Args:
        url: database URL; None means ``AGENTLEDGER_DATABASE_URL``, else
            ``sqlite:///agentledger.db`` in the current folder. A plain ``postgresql://``,
            ``mysql://`` or ``sqlite:///`` URL picks the right driver.
        engine: an existing Engine to use instead (it is never disposed here).
        schema: PostgreSQL only: the schema holding agentledger's tables.
        clock: the source of "now" (for tests); must return aware datetimes.
        limits: JSON size and depth limits.
    """

    def __init__(
        self,
        url: str | URL | None = None,
        *,
        engine: Engine | None = None,
        schema: str | None = None,
        clock: Clock | None = None,
        limits: Limits | None = None,
        _memory: MemoryDatabase | None = None,
    ) -> None:
        super().__init__(url, engine, schema, clock, limits, _memory)
        if engine is not None and not isinstance(engine, Engine):
            raise ValidationError(
                f"Ledger takes a sync Engine, got {type(engine).__name__}; "
                "use AsyncLedger with an AsyncEngine",
                path="engine",
            )
        self._engine = engine if engine is not None else create_sync_engine(url)
        self.settings = self._settings_for(self._engine.url, self._engine.dialect.name)
        self._bind = self._binds(self._engine)
        self.sessions = SessionsOnLedger(self._transact)
        """Session operations, each in its own transaction."""
        self.messages = MessagesOnLedger(self._transact)
        """Message operations, each in its own transaction."""
        self.steps = StepsOnLedger(self._transact)
        """Step operations, each in its own transaction."""
        self.grants = GrantsOnLedger(self._transact)
        """Grant operations, each in its own transaction."""
        self.checkpoints = CheckpointsOnLedger(self._transact)
        """Checkpoint operations, each in its own transaction."""

    @classmethod
    def in_memory(cls, *, clock: Clock | None = None, limits: Limits | None = None) -> Ledger:
        """A private in-process store (SQLite memdb), migrated on first use."""
        memory = MemoryDatabase()
        return cls(memory.url(asynchronous=False), clock=clock, limits=limits, _memory=memory)

    @property
    def engine(self) -> Engine:
        """The Engine this ledger runs on."""
        return self._engine

    def _ensure_ready(self) -> None:
        self._check_open()
        if self._ready:
            return
        with translated(self.settings.url), self._engine.connect() as connection:
            self._prepare(connection)
            if connection.in_transaction():
                connection.commit()
        self._bind = self._binds(self._engine)
        self._ready = True

    def _work(self, *, writes: bool, join: Connection | Session | None = None) -> Work:
        self._ensure_ready()
        if join is None:
            session = Session(bind=self._bind[writes], expire_on_commit=False, autoflush=False)
            return Work(session, self.settings, writes=writes, joined=False)
        if isinstance(join, Session):
            join.flush()
            join = join.connection()
        if not isinstance(join, Connection):
            raise ValidationError(
                f"join= takes a Connection or an ORM Session, got {type(join).__name__}",
                path="join",
            )
        session = Session(
            bind=join,
            expire_on_commit=False,
            autoflush=False,
            join_transaction_mode="create_savepoint",
        )
        return Work(session, self.settings, writes=True, joined=True)

    def _transact(self, writes: bool, fn: Callable[[Work], R]) -> R:
        refuse_if_open(self._key)

        def attempt() -> R:
            work = self._work(writes=writes)
            return work.transact(lambda: fn(work))

        return retrying(attempt)

    @contextmanager
    def unit_of_work(self, *, join: Connection | Session | None = None) -> Iterator[UnitOfWork]:
        """One write transaction; with ``join``, a SAVEPOINT in the caller's transaction."""
        refuse_if_open(self._key)
        work = self._work(writes=True, join=join)
        with marked_open(self._key), UnitOfWork(work) as uow:
            yield uow

    def run(self, fn: Callable[[UnitOfWork], R], *, retries: int = 3) -> R:
        """Run ``fn(uow)`` in a fresh unit of work, again on a conflict or retryable
        error (up to ``retries`` more times, with jittered backoff)."""
        for delay in backoff_delays(retries):
            try:
                with self.unit_of_work() as uow:
                    return fn(uow)
            except Exception as error:
                if delay is None or not should_retry(error):
                    raise
            time.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

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


class AsyncUnitOfWork:
    """One write transaction with the repositories (async API).

    Leaving the ``async with`` block commits; an exception rolls back; after a
    ConflictError the unit of work is rollback-only.
    """

    def __init__(self, session: AsyncSession, work: Work) -> None:
        self._async_session = session
        self._work = work
        self.sessions = AsyncSessionRepository(self._run)
        """Sessions of this unit of work."""
        self.messages = AsyncMessageRepository(self._run)
        """Messages of this unit of work."""
        self.steps = AsyncStepRepository(self._run)
        """Steps of this unit of work."""
        self.grants = AsyncGrantRepository(self._run)
        """Grants of this unit of work."""
        self.checkpoints = AsyncCheckpointRepository(self._run)
        """Checkpoints of this unit of work."""

    async def _run(self, _writes: bool, fn: Callable[[Work], R]) -> R:
        work = self._work
        return await self._async_session.run_sync(lambda _session: fn(work))

    async def __aenter__(self) -> AsyncUnitOfWork:
        await self._async_session.run_sync(lambda _session: self._work.begin())
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        failed = exc_type is not None
        await self._async_session.run_sync(lambda _session: self._work.finish(failed))

    @property
    def session(self) -> AsyncSession:
        """The AsyncSession of this unit of work, for direct queries on the models."""
        return self._async_session


class AsyncLedger(_LedgerBase):
    """agentledger's entry point: sessions, messages, steps, grants and checkpoints.

    Args:
        url: database URL; None means ``AGENTLEDGER_DATABASE_URL``, else
            ``sqlite:///agentledger.db`` in the current folder. A plain ``postgresql://``,
            ``mysql://`` or ``sqlite:///`` URL picks the right async driver.
        engine: an existing AsyncEngine to use instead (it is never disposed here).
        schema: PostgreSQL only: the schema holding agentledger's tables.
        clock: the source of "now" (for tests); must return aware datetimes.
        limits: JSON size and depth limits.
    """

    def __init__(
        self,
        url: str | URL | None = None,
        *,
        engine: AsyncEngine | None = None,
        schema: str | None = None,
        clock: Clock | None = None,
        limits: Limits | None = None,
        _memory: MemoryDatabase | None = None,
    ) -> None:
        super().__init__(url, engine, schema, clock, limits, _memory)
        if engine is not None and not isinstance(engine, AsyncEngine):
            raise ValidationError(
                f"AsyncLedger takes an AsyncEngine, got {type(engine).__name__}; "
                "use Ledger with a sync Engine",
                path="engine",
            )
        self._engine = engine if engine is not None else create_async_engine_for(url)
        self.settings = self._settings_for(self._engine.url, self._engine.dialect.name)
        self._bind = self._binds(self._engine)
        self._ready_lock = asyncio.Lock()
        self.sessions = AsyncSessionRepository(self._transact)
        """Session operations, each in its own transaction."""
        self.messages = AsyncMessageRepository(self._transact)
        """Message operations, each in its own transaction."""
        self.steps = AsyncStepRepository(self._transact)
        """Step operations, each in its own transaction."""
        self.grants = AsyncGrantRepository(self._transact)
        """Grant operations, each in its own transaction."""
        self.checkpoints = AsyncCheckpointRepository(self._transact)
        """Checkpoint operations, each in its own transaction."""

    @classmethod
    def in_memory(cls, *, clock: Clock | None = None, limits: Limits | None = None) -> AsyncLedger:
        """A private in-process store (SQLite memdb), migrated on first use."""
        memory = MemoryDatabase()
        return cls(memory.url(asynchronous=True), clock=clock, limits=limits, _memory=memory)

    @property
    def engine(self) -> AsyncEngine:
        """The AsyncEngine this ledger runs on."""
        return self._engine

    async def _ensure_ready(self) -> None:
        self._check_open()
        if self._ready:
            return
        async with self._ready_lock:
            if self._ready:
                return
            with translated(self.settings.url):
                async with self._engine.connect() as connection:
                    await connection.run_sync(self._prepare)
                    if connection.in_transaction():
                        await connection.commit()
            self._bind = self._binds(self._engine)
            self._ready = True

    async def _work(
        self, *, writes: bool, join: AsyncConnection | AsyncSession | None = None
    ) -> tuple[AsyncSession, Work]:
        await self._ensure_ready()
        if join is None:
            session = AsyncSession(bind=self._bind[writes], expire_on_commit=False, autoflush=False)
            return session, Work(session.sync_session, self.settings, writes=writes, joined=False)
        if isinstance(join, AsyncSession):
            await join.flush()
            join = await join.connection()
        if not isinstance(join, AsyncConnection):
            raise ValidationError(
                f"join= takes an AsyncConnection or an AsyncSession, got {type(join).__name__}",
                path="join",
            )
        session = AsyncSession(
            bind=join,
            expire_on_commit=False,
            autoflush=False,
            join_transaction_mode="create_savepoint",
        )
        return session, Work(session.sync_session, self.settings, writes=True, joined=True)

    async def _transact(self, writes: bool, fn: Callable[[Work], R]) -> R:
        refuse_if_open(self._key)

        async def attempt() -> R:
            session, work = await self._work(writes=writes)
            return await session.run_sync(lambda _session: work.transact(lambda: fn(work)))

        return await retrying_async(attempt)

    @asynccontextmanager
    async def unit_of_work(
        self, *, join: AsyncConnection | AsyncSession | None = None
    ) -> AsyncIterator[AsyncUnitOfWork]:
        """One write transaction; with ``join``, a SAVEPOINT in the caller's transaction."""
        refuse_if_open(self._key)
        session, work = await self._work(writes=True, join=join)
        with marked_open(self._key):
            async with AsyncUnitOfWork(session, work) as uow:
                yield uow

    async def run(self, fn: Callable[[AsyncUnitOfWork], Awaitable[R]], *, retries: int = 3) -> R:
        """Run ``await fn(uow)`` in a fresh unit of work, again on a conflict or retryable
        error (up to ``retries`` more times, with jittered backoff)."""
        for delay in backoff_delays(retries):
            try:
                async with self.unit_of_work() as uow:
                    return await fn(uow)
            except Exception as error:
                if delay is None or not should_retry(error):
                    raise
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    async def upgrade(self, revision: str = "head") -> None:
        """Apply agentledger's migrations up to ``revision``."""
        self._check_open()
        schema = self.settings.schema
        with translated(self.settings.url):
            async with self._engine.connect() as connection:
                await connection.run_sync(
                    lambda sync: migrations.upgrade(sync, revision, schema=schema)
                )
                if connection.in_transaction():
                    await connection.commit()
        self._ready = False

    async def close(self) -> None:
        """Release the engine if this ledger created it; a borrowed one is left alone."""
        if self._closed:
            return
        self._closed = True
        if self._owns_engine:
            await self._engine.dispose()
        if self._memory is not None:
            self._memory.close()

    async def __aenter__(self) -> AsyncLedger:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()
