"""A ``LedgerSessionService`` on the async targets of each test's tier (tests/backends.py).

Server databases are migrated once per run and emptied after each test; the in-memory
backend gets a fresh private store per test, copied from a migrated template.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from agentledger import AsyncLedger
from agentledger.integrations.adk import LedgerSessionService

from ...backends import Target, parametrize_targets
from ...databases import empty_tables, memory_ledger, migrated_once


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_targets(metafunc, "ledger", modes=("async",))
    parametrize_targets(metafunc, "shared_url", modes=("async",), shared=True)


@pytest.fixture
async def ledger(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[AsyncLedger]:
    target: Target = request.param
    if target.backend.in_memory:
        memory = memory_ledger("async")
        try:
            yield memory
        finally:
            await memory.close()
        return
    base = migrated_once(target.dialect, tmp_path_factory)
    opened = AsyncLedger(target.url_for(base))
    try:
        yield opened
    finally:
        await opened.close()
        empty_tables(base)


@pytest.fixture
def service(ledger: AsyncLedger) -> LedgerSessionService:
    return LedgerSessionService(ledger)


@pytest.fixture
def shared_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The async URL of a migrated database other processes can open too."""
    target: Target = request.param
    base = migrated_once(target.dialect, tmp_path_factory)
    try:
        yield target.url_for(base).render_as_string(hide_password=False)
    finally:
        empty_tables(base)
