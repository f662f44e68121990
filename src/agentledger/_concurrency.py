"""How sync code waits, and how the async API runs it: the one twin mechanism.

agentledger is written once, as sync code against SQLAlchemy's sync ``Session``. The
async API runs that same code in a greenlet (``greenlet_spawn``, what
``AsyncSession.run_sync`` does), where the async driver's I/O is awaited on the event
loop. Every async member is therefore a one-line hand-off, ``await run(sync_member,
...)``, where ``run`` is a ``Runner``: ``spawn`` (that greenlet), or for the ledger-level
calls of an async ledger on a SQLite file a ``ThreadHop``, which runs the same sync
member on a sync (pysqlite) twin engine in one worker-thread hop, instead of the hop
per cursor call aiosqlite makes. The helpers here adapt the two shapes a one-liner
cannot: context managers and iterators.

Sync code that must wait without a database call (a backoff between retries, a lock,
file I/O) asks its ``Waits``: ``BLOCKING`` for the sync API (threads), ``GREENLET`` for
code running under the async API (the event loop must not block: sleeps and locks are
awaited, file I/O goes to a worker thread).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import itertools
import os
import sys
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, asynccontextmanager
from typing import Any, ParamSpec, Protocol, TypeVar, cast

from sqlalchemy.util import await_only as await_
from sqlalchemy.util import greenlet_spawn as spawn

T = TypeVar("T")
P = ParamSpec("P")

__all__ = [
    "BLOCKING",
    "GREENLET",
    "Runner",
    "ThreadHop",
    "Waits",
    "async_context",
    "async_iterate",
    "await_",
    "in_greenlet",
    "spawn",
]


class Runner(Protocol):
    """How an async face runs one sync call: ``spawn`` (a greenlet) or a ``ThreadHop``."""

    def __call__(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Awaitable[T]:
        """Run ``fn(*args, **kwargs)`` and return its result."""
        ...


in_greenlet = cast(Runner, spawn)
"""``spawn`` as a ``Runner`` (the default of every async face)."""


class ThreadHop:
    """A ``Runner`` that runs each sync call in one hop to a worker thread of its own
    pool (``workers`` threads), with the caller's context variables.

    ``check`` runs first, in the event loop (the refusal of a ledger-level call inside
    the same task's unit of work, which needs the caller's task). The code it runs
    must finish its transaction within the call and block only its thread (sync code
    with ``BLOCKING`` waits). A call cancelled while it runs in its thread finishes
    there (as with ``asyncio.to_thread``): its transaction commits or rolls back as a
    whole, and the caller does not learn which. ``close`` waits for the running calls
    and stops the threads; later calls raise what ``check`` raises.
    """

    def __init__(self, check: Callable[[], None], *, workers: int, name: str) -> None:
        self._check = check
        self._workers = workers
        self._name = name
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        _HOPS.add(self)
        self.items_per_call = ITEMS_PER_HOP
        """How many items ``async_iterate`` takes from an iterator in one hop."""
        self.submitted = 0
        """How many calls were handed to the threads (for tests)."""

    async def __call__(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        self._check()
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        future = asyncio.get_running_loop().run_in_executor(self._executor, call)
        self.submitted += 1
        return await future

    def close(self) -> None:
        """Wait for the calls running in the threads, then stop the threads (blocks)."""
        self._executor.shutdown(wait=True)

    def _renew_in_child(self) -> None:
        """After ``os.fork()``, in the child: the parent's worker threads do not exist
        there, and the executor, counting them as idle, would start none, so a call
        would wait forever. A new executor starts its threads as calls come."""
        self._executor = ThreadPoolExecutor(
            max_workers=self._workers, thread_name_prefix=self._name
        )


_HOPS: weakref.WeakSet[ThreadHop] = weakref.WeakSet()


def _renew_hops_in_child() -> None:
    for hop in list(_HOPS):
        hop._renew_in_child()


os.register_at_fork(after_in_child=_renew_hops_in_child)


class Waits(Protocol):
    """How sync agentledger code waits when it is not waiting on the database."""

    def sleep(self, seconds: float) -> None:
        """Pause this caller for ``seconds``."""

    def lock(self) -> AbstractContextManager[object]:
        """A new mutual-exclusion lock for callers of this kind."""

    def offload(self, fn: Callable[..., T], *args: Any) -> T:
        """Run blocking, non-database I/O (files, gzip) and return its result."""


class _Blocking:
    """The sync API: threads block."""

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def lock(self) -> AbstractContextManager[object]:
        return threading.Lock()

    def offload(self, fn: Callable[..., T], *args: Any) -> T:
        return fn(*args)


class _GreenletLock:
    """A lock for sync code in a greenlet, on whatever event loop runs it: a thread
    lock taken without blocking the loop (tried, then awaited for a moment between
    tries). An asyncio.Lock would belong to the first loop that waits on it, and an
    async ledger is shared by loops in several threads and by loops made one after
    another (``asyncio.run`` per task): a lock bound to one of them fails in the
    others. It guards short, rare sections (a ledger's first-use checks)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> object:
        while not self._lock.acquire(blocking=False):
            await_(asyncio.sleep(LOCK_POLL_S))
        return True

    def __exit__(self, *_: object) -> None:
        self._lock.release()


LOCK_POLL_S = 0.002
"""How long a greenlet waiting for a ``_GreenletLock`` sleeps between tries."""


class _Greenlet:
    """Sync code run by the async API: waits are awaited on the event loop."""

    def sleep(self, seconds: float) -> None:
        await_(asyncio.sleep(seconds))

    def lock(self) -> AbstractContextManager[object]:
        return _GreenletLock()

    def offload(self, fn: Callable[..., T], *args: Any) -> T:
        return await_(asyncio.to_thread(fn, *args))


BLOCKING: Waits = _Blocking()
GREENLET: Waits = _Greenlet()


@asynccontextmanager
async def async_context(manager: AbstractContextManager[T]) -> AsyncIterator[T]:
    """A sync context manager entered and left in greenlets, for ``async with``."""
    value = await spawn(manager.__enter__)
    try:
        yield value
    except BaseException:
        if not await spawn(manager.__exit__, *sys.exc_info()):
            raise
    else:
        await spawn(manager.__exit__, None, None, None)


_DONE = object()
ITEMS_PER_HOP = 256
"""Items a ``ThreadHop`` takes from an iterator per hop: a hop costs far more than a
greenlet switch. The iterator may read its next page (a read transaction of its own)
before the caller asks for it; a chunk stays small next to a page."""


async def async_iterate(iterator: Iterator[T], run: Runner = in_greenlet) -> AsyncIterator[T]:
    """A sync iterator advanced by ``run``, for ``async for``: an item per greenlet
    switch, or a chunk of ``items_per_call`` items per thread hop; closed (the same
    way) when the loop ends early, so a generator's clean-up can use the database."""
    chunk = getattr(run, "items_per_call", 1)
    try:
        if chunk > 1:
            while True:
                items = await run(_take, iterator, chunk)
                for item in items:
                    yield item
                if len(items) < chunk:
                    return
        while True:
            value = await run(_next, iterator)
            if value is _DONE:
                return
            yield cast(T, value)
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            await run(close)


def _next(iterator: Iterator[Any]) -> object:
    return next(iterator, _DONE)


def _take(iterator: Iterator[T], n: int) -> list[T]:
    return list(itertools.islice(iterator, n))
