"""The contract fixture: a Harness on the targets of each test's tier (tests/backends.py).

Server databases are migrated once per run and emptied after each test; an
in-memory backend gets a fresh private store per test, copied from a migrated
template. The harness gives every hook the suite declares, except ``reopen`` on an
in-memory store (a second process could not open it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest
from sqlalchemy.engine import URL

from agentledger import AsyncLedger, Ledger
from agentledger.testing import Harness, SyncAdapter, sqlalchemy_caller_transaction

from ..backends import Target, parametrize_targets
from ..databases import empty_tables, memory_ledger, migrated_once


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_targets(metafunc, "harness")


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


@pytest.fixture
async def harness(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Harness]:
    target: Target = request.param
    mode, name = target.mode, target.name
    if target.backend.in_memory:
        opened = memory_ledger(mode)
        memory: Any = opened if mode == "async" else SyncAdapter(opened)
        try:
            yield Harness(memory, mode, name, **_hooks(memory, mode, None))
        finally:
            await memory.close()
        return
    base = migrated_once(target.dialect, tmp_path_factory)
    url = target.url_for(base)
    ledger = _ledger(mode, url)
    try:
        yield Harness(ledger, mode, name, **_hooks(ledger, mode, url))
    finally:
        await ledger.close()
        empty_tables(base)
