"""How sync code waits, and how the async API runs it: the one twin mechanism.

agentledger is written once, as sync code against SQLAlchemy's sync ``Session``. The
async API runs that same code in a greenlet (``greenlet_spawn``, what
``AsyncSession.run_sync`` does), where the async driver's I/O is awaited on the event
loop. Every async member is therefore a one-line hand-off, ``await spawn(sync_member,
...)``; the helpers here adapt the two shapes a one-liner cannot: context managers and
iterators.

Sync code that must wait without a database call (a backoff between retries, a lock,
file I/O) asks its ``Waits``: ``BLOCKING`` for the sync API (threads), ``GREENLET`` for
code running under the async API (the event loop must not block: sleeps and locks are
awaited, file I/O goes to a worker thread).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, asynccontextmanager
from typing import Any, Protocol, TypeVar, cast

from sqlalchemy.util import await_only as await_
from sqlalchemy.util import greenlet_spawn as spawn

T = TypeVar("T")

__all__ = ["BLOCKING", "GREENLET", "Waits", "async_context", "async_iterate", "await_", "spawn"]


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
    """An asyncio.Lock usable from sync code in a greenlet (created at first use, so on
    the loop that uses it)."""

    def __init__(self) -> None:
        self._lock: asyncio.Lock | None = None

    def __enter__(self) -> object:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return await_(self._lock.acquire())

    def __exit__(self, *_: object) -> None:
        assert self._lock is not None
        self._lock.release()


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


async def async_iterate(iterator: Iterator[T]) -> AsyncIterator[T]:
    """A sync iterator advanced in greenlets, for ``async for``; closed (in a greenlet
    too) when the loop ends early, so a generator's clean-up can use the database."""
    try:
        while True:
            item = await spawn(next, iterator, _DONE)
            if item is _DONE:
                return
            yield cast(T, item)
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            await spawn(close)
