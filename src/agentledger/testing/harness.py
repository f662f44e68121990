"""The harness the contract suite runs against: a ledger, its mode, and optional hooks.

The suite is written once, against the async API. A sync ``Ledger`` takes part
through ``SyncAdapter``, which makes its methods awaitable without ever suspending,
so the same test body drives both surfaces. Concurrency helpers use tasks for the
async API and threads for the sync one.

The suite reaches the store only through ``Harness.ledger`` (its repositories, units
of work, records and errors) and through the hooks below; whatever else a test needs
to see (SQL statements, rows, query plans) is agentledger's own business and is tested
in agentledger's repository, not here.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

import pytest
from sqlalchemy import Connection, Engine, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession
from sqlalchemy.orm import Session

from agentledger._awaited import Awaited, run_to_end

T = TypeVar("T")
REPOSITORIES = (
    "sessions",
    "messages",
    "steps",
    "grants",
    "checkpoints",
    "app_state",
    "user_state",
    "memory",
)
Hook = Literal["reopen", "configured", "caller_transaction"]
Tier = Literal["logic", "dialect", "driver"]
"""How widely a contract test needs to run (see ``tier``)."""
TIERS: tuple[Tier, ...] = ("logic", "dialect", "driver")
_TIER_ATTRIBUTE = "__agentledger_tier__"
Declared = TypeVar("Declared")


def tier(name: Tier) -> Callable[[Declared], Declared]:
    """Declare how widely a contract test (a method, or every method of a class) needs
    to run, so a store on several databases runs each test only where it can differ:

    - ``"logic"``: its behaviour cannot differ by database, driver or API (input refused
      before any SQL, cursors, limits): one store is enough.
    - ``"dialect"``, the default: it may differ by database (types, JSON, statements,
      locks): once on each database.
    - ``"driver"``: it may differ by driver or API too (concurrent writers, a caller's
      own transaction, snapshots): on every driver of every database, sync and async.

    A method's tier overrides its class's. A store on one database can ignore tiers;
    agentledger's own suite reads them with ``tier_of``.
    """
    if name not in TIERS:
        raise ValueError(f"a tier is one of {', '.join(TIERS)}, got {name!r}")

    def declare(target: Declared) -> Declared:
        setattr(target, _TIER_ATTRIBUTE, name)
        return target

    return declare


def tier_of(function: Callable[..., Any], cls: type | None = None) -> Tier:
    """The tier declared on a test ``function`` or on its ``cls``, else ``"dialect"``."""
    declared = getattr(function, _TIER_ATTRIBUTE, None) or getattr(cls, _TIER_ATTRIBUTE, None)
    return declared or "dialect"


def drive(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never really suspends (it only awaits SyncAdapter calls)."""
    return run_to_end(coroutine, what="a test body for the sync API")


class _Awaitable(Awaited):
    """A sync object whose methods are awaitable; its repositories are wrapped too."""

    def wrapped(self, name: str, value: Any) -> Any | None:
        if name in REPOSITORIES:
            return _Awaitable(value)
        if name == "iterate":
            return _async_iterator(value)
        return None


def _async_iterator(method: Callable[..., Iterator[T]]) -> Callable[..., AsyncIterator[T]]:
    async def iterate(*args: Any, **kwargs: Any) -> AsyncIterator[T]:
        for item in method(*args, **kwargs):
            yield item

    return iterate


class SyncAdapter(_Awaitable):
    """Presents a sync ``Ledger`` with the async API's shape, for the shared suite."""

    def unit_of_work(self, **options: Any) -> AbstractAsyncContextManager[Any]:
        """The sync unit of work as an async context manager yielding an awaitable one."""

        @asynccontextmanager
        async def opened() -> AsyncIterator[Any]:
            with self._target.unit_of_work(**options) as uow:
                yield _Awaitable(uow)

        return opened()

    async def run(self, fn: Callable[[Any], Coroutine[Any, Any, T]], **options: Any) -> T:
        """``Ledger.run`` with an async ``fn`` (and ``run``'s options), driven without an
        event loop."""
        return self._target.run(lambda uow: drive(fn(_Awaitable(uow))), **options)  # type: ignore[no-any-return]


class Barrier:
    """A barrier for n workers that suits the mode: threads block, tasks await."""

    def __init__(self, parties: int, mode: str) -> None:
        self._mode = mode
        self._threads = threading.Barrier(parties)
        self._tasks = asyncio.Barrier(parties) if mode == "async" else None

    async def wait(self) -> None:
        """Return once every party is waiting (threads give up after 60 seconds)."""
        if self._tasks is not None:
            await self._tasks.wait()
        else:
            self._threads.wait(timeout=60)


class CallerTransaction(Protocol):
    """A host application's own transaction, as the ``caller_transaction`` hook yields it.

    ``join`` is what ``ledger.unit_of_work(join=...)`` takes (for agentledger, a
    SQLAlchemy ``Connection``/``Session`` or their async twins) in an open transaction.
    """

    join: Any

    async def execute(self, sql: str, **params: Any) -> Any:
        """Run ``sql`` in the caller's transaction; the result has ``scalar()``."""
        ...

    async def commit(self) -> None:
        """Commit the caller's transaction."""
        ...

    async def rollback(self) -> None:
        """Roll the caller's transaction back."""
        ...


LedgerOpener = Callable[..., AbstractAsyncContextManager[Any]]
"""A hook that opens a second ledger (async-shaped, like ``Harness.ledger``)."""
CallerOpener = Callable[..., AbstractAsyncContextManager[CallerTransaction]]
"""A hook that opens a caller's transaction: ``opener(orm=False)``."""

_USED_BY: dict[str, str] = {
    "reopen": "a second ledger opened on the same data, as a new process would",
    "configured": "a second ledger on the same data with its own clock or limits",
    "caller_transaction": "a host application's own transaction to join",
}


@dataclass
class Harness:
    """What a contract test gets: the store under test, how to drive it, and hooks.

    A store provides ``ledger``, ``mode`` and ``backend``. The hooks are optional: a
    test that needs one the store leaves out (None) is skipped, naming the hook.

    Attributes:
        ledger: the store, with agentledger's async API: the repositories
            ``sessions``, ``messages``, ``steps``, ``grants`` and ``checkpoints``
            (awaitable methods, ``steps.iterate`` an async iterator), ``unit_of_work()``
            (an async context manager yielding a unit of work with the same five
            repositories; ``join=`` for the joined tests), ``run(fn, retries=)`` and
            ``close()``. A sync store is given as ``SyncAdapter(ledger)``.
        mode: ``"async"`` (concurrent workers are tasks) or ``"sync"`` (threads).
        backend: the store's name, shown in messages.
        reopen: ``reopen()`` opens a second, independent ledger on the same stored
            data, as a new process would (an async context manager yielding it,
            async-shaped like ``ledger``). Used by ``GrantContract``.
        configured: ``configured(clock=None, limits=None)`` opens a second ledger on
            the same stored data with agentledger's ``clock`` option (a callable
            returning an aware datetime: the ledger's "now") and ``limits`` option (an
            ``agentledger.Limits``). Used by ``CheckpointExpiryContract`` and the
            checkpoint size-limit test.
        caller_transaction: ``caller_transaction(orm=False)`` opens a host
            application's own transaction (``orm=True``: an ORM session) and yields a
            ``CallerTransaction``, rolled back at the end unless committed. Used by the
            ``UnitOfWorkContract`` tests of ``unit_of_work(join=...)``;
            ``sqlalchemy_caller_transaction(ledger)`` makes it for a ledger whose
            ``engine`` is a SQLAlchemy Engine or AsyncEngine.
    """

    ledger: Any
    mode: str
    backend: str
    reopen: LedgerOpener | None = None
    configured: LedgerOpener | None = None
    caller_transaction: CallerOpener | None = None

    def require(self, hook: Hook) -> Any:
        """The hook named ``hook``; without it, skip the calling test saying so."""
        found = getattr(self, hook)
        if found is None:
            pytest.skip(
                f"{self.backend}: the harness has no `{hook}` hook ({_USED_BY[hook]}); "
                "give Harness one to run this test"
            )
        return found

    async def concurrently(self, count: int, worker: Callable[[int], Awaitable[T]]) -> list[T]:
        """Run ``worker(0..count-1)`` at once: tasks (async API) or threads (sync API)."""
        if self.mode == "async":
            return list(await asyncio.gather(*(worker(index) for index in range(count))))

        def in_thread(index: int) -> T:
            return drive(worker(index))  # type: ignore[arg-type]

        with ThreadPoolExecutor(max_workers=count) as pool:
            return list(pool.map(in_thread, range(count)))

    def barrier(self, parties: int) -> Barrier:
        """A barrier for ``parties`` workers of ``concurrently``."""
        return Barrier(parties, self.mode)


def sqlalchemy_caller_transaction(ledger: Any) -> CallerOpener:
    """The ``caller_transaction`` hook for a ledger whose ``engine`` attribute is a
    SQLAlchemy Engine or AsyncEngine (agentledger's ``Ledger`` and ``AsyncLedger``): a
    connection (or, with ``orm``, an ORM session) of that engine in a transaction."""

    @asynccontextmanager
    async def opened(*, orm: bool = False) -> AsyncIterator[CallerTransaction]:
        engine = ledger.engine
        if isinstance(engine, AsyncEngine):
            if orm:
                async with AsyncSession(engine) as session, session.begin():
                    yield _Caller(session, session)
                    await session.rollback()
                return
            async with engine.connect() as connection:
                await connection.begin()
                yield _Caller(connection, connection)
                await connection.rollback()
            return
        with _sync_caller(engine, orm) as caller:
            yield _Caller(caller, caller)

    return opened


@dataclass
class _Caller:
    """A ``CallerTransaction`` on a SQLAlchemy connection or ORM session."""

    join: Any
    _connection: Connection | AsyncConnection | Session | AsyncSession

    async def execute(self, sql: str, **params: Any) -> Any:
        result = self._connection.execute(text(sql), params)
        return await result if inspect.isawaitable(result) else result

    async def commit(self) -> None:
        result = self._connection.commit()
        if inspect.isawaitable(result):
            await result

    async def rollback(self) -> None:
        result = self._connection.rollback()
        if inspect.isawaitable(result):
            await result


@contextmanager
def _sync_caller(engine: Engine, orm: bool) -> Iterator[Connection | Session]:
    if orm:
        with Session(engine) as session, session.begin():
            yield session
            session.rollback()
        return
    with engine.connect() as connection:
        connection.begin()
        yield connection
        connection.rollback()
