"""The contract fixture: a Harness for every backend x mode (sync, async).

Server databases are migrated once per run and emptied after each test; an
in-memory backend gets a fresh private store per test. The harness gives every hook
the suite declares, except ``reopen`` on an in-memory store (a second process could
not open it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest
from sqlalchemy.engine import URL

from agentledger import AsyncLedger, Ledger
from agentledger.testing import Harness, SyncAdapter, sqlalchemy_caller_transaction

from ..backends import BACKENDS, Backend
from ..databases import empty_tables, migrated_once

_MARKS = {
    "sqlite": pytest.mark.sqlite,
    "postgresql": pytest.mark.postgresql,
    "mysql": pytest.mark.mysql,
}


def _params() -> list[Any]:
    return [
        pytest.param((backend, mode), id=f"{backend.name}-{mode}", marks=_MARKS[backend.dialect])
        for backend in BACKENDS
        if backend.contract
        for mode in backend.modes
    ]


def _database(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> URL:
    """A migrated database for ``backend`` (sync driver URL), made once per run."""
    return migrated_once(backend.dialect, tmp_path_factory)


def _ledger(mode: str, *args: Any, **options: Any) -> Any:
    """An async-shaped ledger for ``mode``: an AsyncLedger, or a Ledger behind SyncAdapter."""
    return (
        AsyncLedger(*args, **options) if mode == "async" else SyncAdapter(Ledger(*args, **options))
    )


def _opener(make: Callable[..., Any]) -> Callable[..., AbstractAsyncContextManager[Any]]:
    """A harness hook that opens ``make(**options)`` and closes it afterwards."""

    @asynccontextmanager
    async def opened(**options: Any) -> AsyncIterator[Any]:
        ledger = await make(**options)
        try:
            yield ledger
        finally:
            await ledger.close()

    return opened


def _hooks(ledger: Any, mode: str, url: URL | None) -> dict[str, Any]:
    """The harness hooks for ``ledger``: ``configured`` shares its engine (so it works
    for an in-memory store too); ``reopen`` opens ``url`` afresh, when there is one."""

    async def on_the_same_engine(**options: Any) -> Any:
        await ledger.sessions.exists("warm-up")  # an in-memory store migrates on first use
        return _ledger(mode, engine=ledger.engine, **options)

    async def reopened() -> Any:
        return _ledger(mode, url)

    hooks = {
        "configured": _opener(on_the_same_engine),
        "caller_transaction": sqlalchemy_caller_transaction(ledger),
    }
    if url is not None:
        hooks["reopen"] = _opener(reopened)
    return hooks


@pytest.fixture(params=_params())
async def harness(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Harness]:
    backend, mode = request.param
    name = f"{backend.name}-{mode}"
    if backend.in_memory:
        memory: Any = (
            AsyncLedger.in_memory() if mode == "async" else SyncAdapter(Ledger.in_memory())
        )
        try:
            yield Harness(memory, mode, name, **_hooks(memory, mode, None))
        finally:
            await memory.close()
        return
    base = _database(backend, tmp_path_factory)
    url = backend.url_for(base, mode)
    ledger = _ledger(mode, url)
    try:
        yield Harness(ledger, mode, name, **_hooks(ledger, mode, url))
    finally:
        await ledger.close()
        empty_tables(base)
