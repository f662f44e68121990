"""An async ledger's engines: one per running event loop.

asyncpg, aiomysql, asyncmy and psycopg's async connections belong to the event loop
that opened them: used from another loop they fail ("another operation is in
progress", "attached to a different loop"), and a pool shared by two loops hands one
loop's connections to the other. Servers run async code on many loops: a worker thread
each with its own loop, ``asyncio.run`` per task, a notebook that makes a new loop.

So an ``AsyncLedger`` that created its engine gives each running loop an engine of its
own: the first loop gets the engine the ledger was built with (``ledger.engine``);
another loop running at the same time gets a replica made the same way (the same URL,
options and timeouts), with its own pool. When a loop shuts down (the end of
``asyncio.run``: its ``shutdown_asyncgens``, while it still runs), its engine's
connections are closed on it and the engine serves the next loop that calls. A loop
closed without that step (``new_event_loop``, run, ``close``) closes them in its
``close``, which the ledger wraps; a loop whose ``close`` cannot be wrapped leaves its
connections to be let go unclosed (closing needs the loop that is gone; the server
ends them). aiosqlite is no exception: its connections answer any loop, but its pool
waits on an asyncio queue, which belongs to the first loop that waits on it.

A borrowed AsyncEngine is the caller's and is never replicated: a call from a second
loop while the first still runs is refused, with what to do instead, unless its pool
keeps no connections (``NullPool``).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncGenerator, Callable
from contextlib import suppress
from typing import Protocol

from sqlalchemy import Engine
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import NullPool
from sqlalchemy.util import await_only
from sqlalchemy.util.concurrency import in_greenlet as in_a_greenlet

from ..errors import UsageError


class Engines(Protocol):
    """Where a ledger's transactions run: the engine for the caller, and their end."""

    @property
    def main(self) -> Engine:
        """The engine the ledger was built with."""
        ...

    def __call__(self) -> Engine:
        """The engine for a transaction begun now."""
        ...

    def dispose(self) -> None:
        """Close the pools this ledger made (a borrowed engine is left alone)."""
        ...

    def forget_connections(self) -> None:
        """Let go of every pooled connection without closing it (after ``os.fork()``,
        in the child: they are the parent's)."""
        ...


class OneEngine:
    """A sync ledger's engine: the same for every thread (its pool is thread-safe)."""

    def __init__(self, engine: Engine, *, owned: bool) -> None:
        self._engine = engine
        self._owned = owned

    @property
    def main(self) -> Engine:
        """The engine."""
        return self._engine

    def __call__(self) -> Engine:
        return self._engine

    def dispose(self) -> None:
        """Close the pool if the ledger created the engine."""
        if self._owned:
            self._engine.dispose()

    def forget_connections(self) -> None:
        """Let go of the pooled connections unclosed (a fork's child)."""
        self._engine.dispose(close=False)


class _Tenancy:
    """One running loop's use of one engine, and the async generator that tells when
    the loop shuts down (``shutdown_asyncgens``: ``asyncio.run`` and ``asyncio.Runner``
    call it at their end, while the loop still runs)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, engine: AsyncEngine) -> None:
        self.loop = weakref.ref(loop)
        self.engine = engine
        self.watcher: AsyncGenerator[None, None] | None = None

    def loop_gone(self) -> bool:
        loop = self.loop()
        return loop is None or loop.is_closed()

    def end_watch(self) -> None:
        """Finish the watcher here and now (its loop is gone, or this process is a fork's
        child): left to the garbage collector, an unfinished one would ask its dead loop
        to close it."""
        watcher, self.watcher = self.watcher, None
        if watcher is not None:
            with suppress(StopIteration, StopAsyncIteration, RuntimeError):
                watcher.aclose().send(None)


_CLOSES_ENGINES = "_agentledger_closes_engines"


def _before_close(loop: asyncio.AbstractEventLoop, watcher: AsyncGenerator[None, None]) -> None:
    """Make ``loop.close()`` end ``watcher`` first, on the loop, where its connections
    can still be closed: for a loop closed without ``shutdown_asyncgens`` (made with
    ``new_event_loop``, run, closed, as the SDKs' own tests and many servers do). A loop
    whose ``close`` cannot be wrapped (a compiled loop class) keeps the fallback: its
    connections are let go at the next call."""
    watchers: list[AsyncGenerator[None, None]] | None = getattr(loop, _CLOSES_ENGINES, None)
    if watchers is not None:
        watchers.append(watcher)
        return
    watchers = [watcher]
    original = loop.close

    def close() -> None:
        if not loop.is_closed() and not loop.is_running():
            for each in watchers:
                with suppress(Exception):  # a clean-up must not keep the loop open
                    loop.run_until_complete(each.aclose())
        watchers.clear()
        original()

    with suppress(AttributeError, TypeError):
        loop.close = close  # type: ignore[method-assign]
        setattr(loop, _CLOSES_ENGINES, watchers)


class EnginePerLoop:
    """An async ledger's engines, one per running event loop (see the module)."""

    def __init__(self, first: AsyncEngine, *, make: Callable[[], AsyncEngine] | None) -> None:
        """``make``: a new engine configured as ``first`` was (None: ``first`` is
        borrowed and never replicated)."""
        self._first = first
        self._make = make
        sync_engine = first.sync_engine
        # Only a pool that keeps no connection serves every loop: even aiosqlite's
        # pool (its connections answer any loop) waits on an asyncio queue, which binds
        # to the first loop that waits on it.
        self._loop_free = isinstance(sync_engine.pool, NullPool)
        self._by_loop: dict[int, _Tenancy] = {}
        self._lock = threading.RLock()  # a watcher ended under it takes it again

    @property
    def main(self) -> Engine:
        """The sync engine of the engine the ledger was built with."""
        return self._first.sync_engine

    def __call__(self) -> Engine:
        """The sync engine of the running loop's engine (the first outside a loop)."""
        if self._loop_free:
            return self._first.sync_engine
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return self._first.sync_engine
        found = self._by_loop.get(id(loop))
        if found is not None and found.loop() is loop:
            return found.engine.sync_engine
        with self._lock:
            tenancy = self._assign(loop)
        if tenancy.watcher is None and in_a_greenlet():
            watcher = tenancy.watcher = self._watch(id(loop), tenancy)
            await_only(watcher.__anext__())  # first iterated here: the loop now knows it
            _before_close(loop, watcher)
        return tenancy.engine.sync_engine

    def _assign(self, loop: asyncio.AbstractEventLoop) -> _Tenancy:
        for key, tenancy in list(self._by_loop.items()):
            if tenancy.loop_gone():  # closed without shutting its generators down
                del self._by_loop[key]
                tenancy.end_watch()
                tenancy.engine.sync_engine.dispose(close=False)
        found = self._by_loop.get(id(loop))
        if found is not None and found.loop() is loop:
            return found
        taken = {id(tenancy.engine) for tenancy in self._by_loop.values()}
        if id(self._first) not in taken:
            engine = self._first
        elif self._make is None:
            raise UsageError(
                "this AsyncLedger runs on a borrowed AsyncEngine whose pooled connections "
                "belong to the event loop that opened them, and another loop is using it; "
                "let the ledger create its engine (AsyncLedger(url): one pool per loop), "
                "give each loop its own AsyncLedger, or create the engine with "
                "poolclass=NullPool"
            )
        else:
            engine = self._make()
        tenancy = self._by_loop[id(loop)] = _Tenancy(loop, engine)
        return tenancy

    async def _watch(self, key: int, tenancy: _Tenancy) -> AsyncGenerator[None, None]:
        """Suspended until its loop shuts down; then, still on that loop, the engine's
        connections are closed and the engine is free for the next loop."""
        try:
            yield
        finally:
            with self._lock:
                mine = self._by_loop.get(key) is tenancy
                if mine:
                    del self._by_loop[key]
            if mine and not tenancy.loop_gone():
                await tenancy.engine.dispose()

    def dispose(self) -> None:
        """Close the pools this ledger made: the running loop's here, another running
        loop's on that loop, a closed loop's by letting go (a borrowed engine is left
        alone)."""
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        with self._lock:
            tenancies = list(self._by_loop.values())
            self._by_loop.clear()
        engines_left = {id(self._first): self._first}
        for tenancy in tenancies:
            loop = tenancy.loop()
            engines_left.pop(id(tenancy.engine), None)
            if loop is not None and loop is not running and not loop.is_closed():
                if self._make is not None:
                    asyncio.run_coroutine_threadsafe(tenancy.engine.dispose(), loop)
                tenancy.end_watch()
                continue
            tenancy.end_watch()
            if self._make is not None:
                tenancy.engine.sync_engine.dispose(close=loop is running)
        if self._make is not None:
            for engine in engines_left.values():
                engine.sync_engine.dispose(close=running is not None or self._loop_free)

    def forget_connections(self) -> None:
        """Let go of every engine's pooled connections unclosed (a fork's child: they
        are the parent's)."""
        with self._lock:
            tenancies = list(self._by_loop.values())
            self._by_loop.clear()
        engines = {id(self._first): self._first}
        for tenancy in tenancies:
            tenancy.end_watch()
            engines[id(tenancy.engine)] = tenancy.engine
        for engine in engines.values():
            engine.sync_engine.dispose(close=False)
