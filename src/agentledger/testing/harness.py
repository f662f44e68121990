"""The harness the contract suite runs against: one ledger, its mode, and helpers.

The suite is written once, against the async API. A sync ``Ledger`` takes part
through ``SyncAdapter``, which makes its methods awaitable without ever suspending,
so the same test body drives both surfaces. Concurrency helpers use tasks for the
async API and threads for the sync one.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, event, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession
from sqlalchemy.orm import Session

from ..errors import UsageError

T = TypeVar("T")
REPOSITORIES = (
    "sessions",
    "messages",
    "steps",
    "grants",
    "checkpoints",
    "app_state",
    "user_state",
)


def drive(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never really suspends (it only awaits SyncAdapter calls)."""
    try:
        coroutine.send(None)
    except StopIteration as finished:
        return finished.value  # type: ignore[no-any-return]
    coroutine.close()
    raise UsageError("a test body for the sync API awaited something that suspends")


class _Awaitable:
    """A sync object whose methods are awaitable; its repositories are wrapped too."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if name in REPOSITORIES:
            return _Awaitable(value)
        if not callable(value):
            return value
        if name == "iterate":
            return _async_iterator(value)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return value(*args, **kwargs)

        return call


def _async_iterator(method: Callable[..., Iterator[T]]) -> Callable[..., AsyncIterator[T]]:
    async def iterate(*args: Any, **kwargs: Any) -> AsyncIterator[T]:
        for item in method(*args, **kwargs):
            yield item

    return iterate


class SyncAdapter(_Awaitable):
    """Presents a sync ``Ledger`` with the async API's shape, for the shared suite."""

    def unit_of_work(self, **options: Any) -> AbstractAsyncContextManager[Any]:
        @asynccontextmanager
        async def opened() -> AsyncIterator[Any]:
            with self._target.unit_of_work(**options) as uow:
                yield _Awaitable(uow)

        return opened()

    async def run(self, fn: Callable[[Any], Coroutine[Any, Any, T]], *, retries: int = 3) -> T:
        return self._target.run(lambda uow: drive(fn(_Awaitable(uow))), retries=retries)  # type: ignore[no-any-return]


class Barrier:
    """A barrier for n workers that suits the mode: threads block, tasks await."""

    def __init__(self, parties: int, mode: str) -> None:
        self._mode = mode
        self._threads = threading.Barrier(parties)
        self._tasks = asyncio.Barrier(parties) if mode == "async" else None

    async def wait(self) -> None:
        if self._tasks is not None:
            await self._tasks.wait()
        else:
            self._threads.wait(timeout=60)


@dataclass
class CallerTransaction:
    """A host application's own connection (or ORM session) in a transaction, to join."""

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


@dataclass
class Harness:
    """What a contract test gets: the ledger (async-shaped) and how to drive it.

    Attributes:
        ledger: an AsyncLedger, or a Ledger behind SyncAdapter.
        mode: ``"async"`` or ``"sync"``.
        backend: the backend's name, for messages.
        process_url: a sync URL separate processes can open, when the backend allows it.
    """

    ledger: Any
    mode: str
    backend: str
    process_url: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)

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

    @asynccontextmanager
    async def caller_transaction(self, *, orm: bool = False) -> AsyncIterator[CallerTransaction]:
        """A connection (or, with ``orm``, an ORM session) of the ledger's engine in a
        transaction of its own, as a host application holds it; rolled back at the end
        unless committed."""
        engine = self.ledger.engine
        if isinstance(engine, AsyncEngine):
            if orm:
                async with AsyncSession(engine) as session, session.begin():
                    yield CallerTransaction(session, session)
                    await session.rollback()
                return
            async with engine.connect() as connection:
                await connection.begin()
                yield CallerTransaction(connection, connection)
                await connection.rollback()
            return
        with _sync_caller(engine, orm) as caller:
            yield CallerTransaction(caller, caller)


@contextmanager
def statements_during(harness: Harness) -> Iterator[list[str]]:
    """The SQL statements the ledger's engine sends inside the block (BEGIN, COMMIT and
    ROLLBACK emitted by the driver itself are not statements and do not show)."""
    engine = harness.ledger.engine
    sync_engine = engine.sync_engine if isinstance(engine, AsyncEngine) else engine
    seen: list[str] = []

    def record(*args: Any) -> None:
        seen.append(args[2])

    event.listen(sync_engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(sync_engine, "before_cursor_execute", record)


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
