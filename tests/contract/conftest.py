"""The contract fixture: a Harness for every backend x mode (sync, async).

Server databases are migrated once per run and emptied after each test; an
in-memory backend gets a fresh private store per test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import URL, make_url

from agentledger import AsyncLedger, Ledger
from agentledger.testing import Harness, SyncAdapter

from ..backends import BACKENDS, Backend
from ..databases import empty_tables, migrated, server_url_or_skip

_MARKS = {
    "sqlite": pytest.mark.sqlite,
    "postgresql": pytest.mark.postgresql,
    "mysql": pytest.mark.mysql,
}
_migrated: dict[str, URL] = {}


def _params() -> list[Any]:
    return [
        pytest.param((backend, mode), id=f"{backend.name}-{mode}", marks=_MARKS[backend.dialect])
        for backend in BACKENDS
        if backend.contract
        for mode in backend.modes
    ]


def _database(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> URL:
    """A migrated database for ``backend`` (sync driver URL), made once per run."""
    key = backend.dialect
    if key not in _migrated:
        if backend.dialect == "sqlite":
            path: Path = tmp_path_factory.mktemp("contract") / "ledger.db"
            url = make_url(f"sqlite+pysqlite:///{path}")
        else:
            url = server_url_or_skip(backend.dialect)
        _migrated[key] = migrated(url)
    return _migrated[key]


@asynccontextmanager
async def _reopened(url: URL, mode: str) -> AsyncIterator[Any]:
    """A second ledger on the same database, as a new process would open it."""
    ledger: Any = AsyncLedger(url) if mode == "async" else SyncAdapter(Ledger(url))
    try:
        yield ledger
    finally:
        await ledger.close()


@pytest.fixture(params=_params())
async def harness(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Harness]:
    backend, mode = request.param
    if backend.in_memory:
        memory: Any = (
            AsyncLedger.in_memory() if mode == "async" else SyncAdapter(Ledger.in_memory())
        )
        try:
            yield Harness(memory, mode, f"{backend.name}-{mode}")
        finally:
            await memory.close()
        return
    base = _database(backend, tmp_path_factory)
    url = backend.url_for(base, mode)
    ledger: Any = AsyncLedger(url) if mode == "async" else SyncAdapter(Ledger(url))
    process_url = str(base) if backend.multiprocess and backend.dialect == "sqlite" else None
    try:
        extras = {"reopen": lambda: _reopened(url, mode)}
        yield Harness(
            ledger, mode, f"{backend.name}-{mode}", process_url=process_url, extras=extras
        )
    finally:
        await ledger.close()
        empty_tables(base)
