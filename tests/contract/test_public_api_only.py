"""The contract suite needs nothing past the public API: it runs against a store that
shows only what a third-party store would.

Every contract class of ``agentledger.testing`` runs here against agentledger's
in-memory ledger behind a wrapper that lets through the eight repositories,
``unit_of_work``, ``run`` and ``close`` (and, on a unit of work, the eight
repositories). A contract test that reaches further, to the engine or an ORM session,
fails here with AttributeError. ``reopen`` is left out, as a store that cannot be
reopened would leave it, so its test shows the skip. This module's own ``harness``
runs every test on both APIs, whatever its tier: what is checked is the API.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

import agentledger.testing
from agentledger import AsyncLedger, Ledger
from agentledger.testing import Harness, SyncAdapter, sqlalchemy_caller_transaction

from ..databases import memory_ledger

REPOSITORIES = frozenset(
    {"sessions", "messages", "steps", "grants", "checkpoints", "app_state", "user_state", "memory"}
)
LEDGER = REPOSITORIES | {"unit_of_work", "run", "close"}


class PublicOnly:
    """``target`` showing only the names in ``allowed``; repositories and units of work
    it hands out are shown the same way."""

    def __init__(self, target: Any, allowed: frozenset[str]) -> None:
        self._target = target
        self._allowed = allowed

    def __getattr__(self, name: str) -> Any:
        if name not in self._allowed:
            raise AttributeError(f"{name!r} is past the API a third-party store offers")
        value = getattr(self._target, name)
        if name in REPOSITORIES:
            return PublicOnly(value, _operations(type(value)))
        if name == "unit_of_work":
            return lambda **options: _UnitOfWork(value(**options))
        if name == "run":
            return lambda fn, **options: value(lambda uow: fn(_unit(uow)), **options)
        return value


def _operations(cls: type) -> frozenset[str]:
    return frozenset(n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n)))


def _unit(uow: Any) -> PublicOnly:
    return PublicOnly(uow, REPOSITORIES)


class _UnitOfWork:
    """A unit of work's context manager (sync or async) yielding it shown publicly."""

    def __init__(self, opening: Any) -> None:
        self._opening = opening

    def __enter__(self) -> PublicOnly:
        return _unit(self._opening.__enter__())

    def __exit__(self, *exc: object) -> Any:
        return self._opening.__exit__(*exc)

    async def __aenter__(self) -> PublicOnly:
        return _unit(await self._opening.__aenter__())

    async def __aexit__(self, *exc: object) -> Any:
        return await self._opening.__aexit__(*exc)


def _shown(ledger: Ledger | AsyncLedger) -> Any:
    only = PublicOnly(ledger, LEDGER)
    return only if isinstance(ledger, AsyncLedger) else SyncAdapter(only)


@pytest.fixture(params=["sync", "async"])
async def harness(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    mode: str = request.param
    inner: Ledger | AsyncLedger = memory_ledger(mode)
    make: Callable[..., Ledger | AsyncLedger] = type(inner)
    shown = _shown(inner)

    @asynccontextmanager
    async def configured(**options: Any) -> AsyncIterator[Any]:
        await shown.sessions.exists("warm-up")  # an in-memory store migrates on first use
        other = _shown(make(engine=inner.engine, **options))
        try:
            yield other
        finally:
            await other.close()

    try:
        yield Harness(
            shown,
            mode,
            f"public-only-{mode}",
            configured=configured,
            caller_transaction=sqlalchemy_caller_transaction(inner),
        )
    finally:
        await shown.close()


for _name in agentledger.testing.__all__:
    if _name.endswith("Contract"):
        _contract = getattr(agentledger.testing, _name)
        globals()[f"Test{_name}"] = type(f"Test{_name}", (_contract,), {})
