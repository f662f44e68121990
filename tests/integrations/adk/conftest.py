"""A ``LedgerSessionService`` on every backend with an async driver.

Server databases are migrated once per run and emptied after each test; the in-memory
backend gets a fresh private store per test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from agentledger import AsyncLedger
from agentledger.integrations.adk import LedgerSessionService

from ...backends import BACKENDS, Backend
from ...databases import empty_tables, migrated_once

_MARKS = {
    "sqlite": pytest.mark.sqlite,
    "postgresql": pytest.mark.postgresql,
    "mysql": pytest.mark.mysql,
}

ASYNC_BACKENDS = [b for b in BACKENDS if b.contract and b.async_driver is not None]


SHARED_BACKENDS = [
    next(b for b in ASYNC_BACKENDS if b.dialect == dialect and b.multiprocess) for dialect in _MARKS
]
"""One backend per dialect that separate processes can share (a file, a server)."""


def backend_params(backends: list[Backend]) -> list[Any]:
    """``pytest.param`` per backend, each with its dialect's marker."""
    return [
        pytest.param(backend, id=backend.name, marks=_MARKS[backend.dialect])
        for backend in backends
    ]


@pytest.fixture(params=backend_params(ASYNC_BACKENDS))
async def ledger(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[AsyncLedger]:
    backend: Backend = request.param
    if backend.in_memory:
        memory = AsyncLedger.in_memory()
        try:
            yield memory
        finally:
            await memory.close()
        return
    base = migrated_once(backend.dialect, tmp_path_factory)
    opened = AsyncLedger(backend.url_for(base, "async"))
    try:
        yield opened
    finally:
        await opened.close()
        empty_tables(base)


@pytest.fixture
def service(ledger: AsyncLedger) -> LedgerSessionService:
    return LedgerSessionService(ledger)


@pytest.fixture(params=backend_params(SHARED_BACKENDS))
def shared_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The async URL of a migrated database other processes can open too."""
    backend: Backend = request.param
    base = migrated_once(backend.dialect, tmp_path_factory)
    try:
        yield backend.url_for(base, "async").render_as_string(hide_password=False)
    finally:
        empty_tables(base)
