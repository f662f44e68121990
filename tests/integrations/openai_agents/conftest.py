"""A migrated AsyncLedger on the async targets of each test's tier (tests/backends.py),
emptied after each test (an in-memory store is fresh per test, copied from a migrated
template), and the URL it was opened with."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from agentledger import AsyncLedger

from ...backends import Target, parametrize_targets
from ...databases import empty_tables, memory_ledger, migrated_once


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_targets(metafunc, "store", modes=("async",))
    parametrize_targets(metafunc, "shared_store", modes=("async",), shared=True)


@dataclass
class Store:
    """An open ledger and, for a database other processes can open, its async URL."""

    ledger: AsyncLedger
    url: str | None
    target: Target


async def _store(target: Target, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Store]:
    if target.backend.in_memory:
        memory = memory_ledger("async")
        try:
            yield Store(memory, None, target)
        finally:
            await memory.close()
        return
    base = migrated_once(target.dialect, tmp_path_factory)
    url = target.url_for(base).render_as_string(hide_password=False)
    ledger = AsyncLedger(url)
    try:
        yield Store(ledger, url, target)
    finally:
        await ledger.close()
        empty_tables(base)


@pytest.fixture
async def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Store]:
    """An AsyncLedger on the targets of the test's tier."""
    async for opened in _store(request.param, tmp_path_factory):
        yield opened


@pytest.fixture
async def shared_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Store]:
    """An AsyncLedger on the targets of the test's tier that other processes can open
    too (not in memory)."""
    async for opened in _store(request.param, tmp_path_factory):
        yield opened


@pytest.fixture(autouse=True)
def _no_trace_export(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's tracing would try to export to OpenAI: off in these tests."""
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
