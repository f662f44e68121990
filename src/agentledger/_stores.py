"""Stores: one ledger's database as seen by a maintenance operation, from sync code.

Export, import, copy and purge are long loops of short transactions. Each is written
once, as sync code against ``Store.transaction()``. With a ``Ledger`` it runs as it is;
with an ``AsyncLedger`` the whole loop runs in one greenlet (``run_in_greenlet``, what
``AsyncSession.run_sync`` does), where the same sync Session drives the async driver.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session
from sqlalchemy.util import greenlet_spawn

from ._concurrency import spawn
from ._dialects import snapshot_read_options
from ._translate import translated
from .repositories._base import Settings, Work

if TYPE_CHECKING:
    from .ledger import AsyncLedger, Ledger

R = TypeVar("R")


class Store:
    """Fresh transactions on one ledger's engine, usable from sync code."""

    def __init__(self, engine: Engine, settings: Settings) -> None:
        self._engine = engine
        self.settings = settings
        # Engines carrying the ledger's own options (schema map, write flag), as the
        # ledger binds its sessions; long reads add the snapshot options.
        self._binds = {
            writes: engine.execution_options(**settings.execution_options(writes=writes))
            for writes in (False, True)
        }
        self._snapshot = engine.execution_options(
            **settings.execution_options(writes=False),
            **snapshot_read_options(engine.dialect.name),
        )

    @property
    def url(self) -> URL:
        """The database URL (masked wherever it is shown)."""
        return self.settings.url

    @property
    def dialect(self) -> str:
        """The dialect name: ``sqlite``, ``postgresql``, ``mysql`` or ``mariadb``."""
        return self._engine.dialect.name

    def begin(self, *, writes: bool, snapshot: bool = False) -> Work:
        """A fresh transaction, begun; end it with ``work.finish(failed=...)``.

        ``snapshot`` makes a read transaction see one snapshot however long it lasts.
        """
        bind = self._snapshot if snapshot and not writes else self._binds[writes]
        session = Session(bind=bind, expire_on_commit=False, autoflush=False)
        work = Work(session, self.settings, writes=writes, joined=False)
        work.begin()
        return work

    @contextmanager
    def transaction(self, *, writes: bool, snapshot: bool = False) -> Iterator[Work]:
        """A fresh transaction: committed when the block ends, rolled back on an error."""
        work = self.begin(writes=writes, snapshot=snapshot)
        try:
            yield work
        except BaseException:
            work.finish(failed=True)
            raise
        work.finish(failed=False)

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """A plain connection outside any transaction (for SQLite's VACUUM)."""
        with translated(self.url), self._engine.connect() as connection:
            yield connection


def open_store(ledger: Ledger) -> Store:
    """The store of a sync ledger, after its schema check (SchemaError when behind)."""
    from .ledger import refuse_if_open

    refuse_if_open(ledger._key)
    ledger._ensure_ready()
    return Store(ledger.engine, ledger.settings)


async def open_async_store(ledger: AsyncLedger) -> Store:
    """The store of an async ledger, after its schema check; use it inside
    ``run_in_greenlet`` only."""
    from .ledger import refuse_if_open

    refuse_if_open(ledger.sync_ledger._key)
    await spawn(ledger.sync_ledger._ensure_ready)
    return Store(ledger.engine.sync_engine, ledger.settings)


async def run_in_greenlet(fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    """Run sync code that uses async stores, the way ``AsyncSession.run_sync`` does."""
    return await greenlet_spawn(fn, *args, **kwargs)
