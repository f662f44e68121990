"""A migrated AsyncLedger on every backend with an async driver, emptied after each
test (an in-memory store is fresh per test), and the URL it was opened with."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import URL, make_url

from agentledger import AsyncLedger

from ..backends import BACKENDS, Backend, by_name
from ..databases import empty_tables, migrated, server_url_or_skip

_MARKS = {
    "sqlite": pytest.mark.sqlite,
    "postgresql": pytest.mark.postgresql,
    "mysql": pytest.mark.mysql,
}
_migrated: dict[str, URL] = {}
ASYNC_BACKENDS = [b for b in BACKENDS if b.contract and b.async_driver is not None]
PROCESS_BACKENDS = [b for b in ASYNC_BACKENDS if b.multiprocess]
DIALECT_BACKENDS = [by_name(n) for n in ("sqlite-file", "postgresql-asyncpg", "mariadb-aiomysql")]


def backend_params(backends: list[Backend]) -> list[object]:
    return [pytest.param(b, id=b.name, marks=_MARKS[b.dialect]) for b in backends]


@dataclass
class Store:
    """An open ledger and, for a database other processes can open, its async URL."""

    ledger: AsyncLedger
    url: str | None
    backend: Backend


def _database(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> URL:
    if backend.dialect not in _migrated:
        if backend.dialect == "sqlite":
            path: Path = tmp_path_factory.mktemp("openai-agents") / "ledger.db"
            url = make_url(f"sqlite+pysqlite:///{path}")
        else:
            url = server_url_or_skip(backend.dialect)
        _migrated[backend.dialect] = migrated(url)
    return _migrated[backend.dialect]


async def _store(
    backend: Backend, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Store]:
    if backend.in_memory:
        memory = AsyncLedger.in_memory()
        try:
            yield Store(memory, None, backend)
        finally:
            await memory.close()
        return
    base = _database(backend, tmp_path_factory)
    url = backend.url_for(base, "async").render_as_string(hide_password=False)
    ledger = AsyncLedger(url)
    try:
        yield Store(ledger, url, backend)
    finally:
        await ledger.close()
        empty_tables(base)


def _store_fixture(name: str, backends: list[Backend], doc: str) -> Any:
    @pytest.fixture(name=name, params=backend_params(backends))
    async def fixture(
        request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
    ) -> AsyncIterator[Store]:
        async for opened in _store(request.param, tmp_path_factory):
            yield opened

    fixture.__doc__ = doc
    return fixture


store = _store_fixture(
    "store",
    ASYNC_BACKENDS,
    "Every async backend: SQLite file and memory, PostgreSQL (asyncpg, psycopg), "
    "MariaDB (aiomysql).",
)
shared_store = _store_fixture(
    "shared_store",
    PROCESS_BACKENDS,
    "Every async backend other processes can open too (not in memory).",
)
dialect_store = _store_fixture(
    "dialect_store",
    DIALECT_BACKENDS,
    "One backend per database other processes can open (slower tests).",
)


@pytest.fixture(autouse=True)
def _no_trace_export(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's tracing would try to export to OpenAI: off in these tests."""
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
