"""agentledger's stores in place of LangGraph's, for the store tests of LangGraph's own
SQLite and PostgreSQL store packages.

Copied into the tests folder of those packages' source distributions as
``conftest.py`` (the PostgreSQL package's own, which empties its server's tables
before each test, is replaced). The test files construct their stores themselves
(``SqliteStore.from_conn_string(":memory:")``, ``PostgresStore.from_conn_string(uri)``
after creating a database on their server), so an autouse fixture puts stand-ins for
those names into each test module: ``from_conn_string`` opens agentledger's
``LedgerStore`` (or ``AsyncLedgerStore``) on the migrated database of the test's
parameter (``AGENTLEDGER_SUITE_<DATABASE>_URL``, emptied of memories before each
test), with the ``index`` and ``ttl`` the test gives, and the server connections the
PostgreSQL tests open to create and drop their databases do nothing. Each test runs
once per database ``AGENTLEDGER_SUITE_DATABASES`` names (its id ends with
``agentledger_<database>``).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from agentledger import AsyncLedger, Ledger
from agentledger.integrations.langgraph import AsyncLedgerStore, LedgerStore

try:  # the PostgreSQL package's tests import these from their conftest
    from tests.embed_test_utils import CharacterEmbeddings  # type: ignore[import-not-found]
except ImportError:  # the SQLite package defines its own in test_store.py
    CharacterEmbeddings = None

DATABASES = [name for name in os.environ["AGENTLEDGER_SUITE_DATABASES"].split(",") if name]
DEFAULT_URI = "postgres://agentledger@unused:5441/postgres?sslmode=disable"
"""Where the PostgreSQL tests think their server is: nothing connects to it."""
VECTOR_TYPES = ["vector", "halfvec"]
_CURRENT: dict[str, str] = {}


def _url() -> str:
    return _CURRENT["url"]


class _NoCursor:
    """What a test's ``store._cursor()`` gets: statements to the reference store's own
    tables (``store_migrations``) are about its migrations, which agentledger has not."""

    def execute(self, *_: Any, **__: Any) -> None:
        return None


class _OurStore(LedgerStore):
    MIGRATIONS: list[Any] = []

    @contextmanager
    def _cursor(self) -> Iterator[_NoCursor]:
        yield _NoCursor()


class _AsyncNoCursor:
    async def execute(self, *_: Any, **__: Any) -> None:
        return None


class _OurAsyncStore(AsyncLedgerStore):
    MIGRATIONS: list[Any] = []

    @asynccontextmanager
    async def _cursor(self) -> AsyncIterator[_AsyncNoCursor]:
        yield _AsyncNoCursor()


class SyncStoreStandIn:
    """``SqliteStore`` / ``PostgresStore`` as the tests use them."""

    MIGRATIONS: list[Any] = []

    @classmethod
    @contextmanager
    def from_conn_string(
        cls, _conn_string: str, *, index: Any = None, ttl: Any = None, **_options: Any
    ) -> Iterator[LedgerStore]:
        with Ledger(_url()) as ledger:
            store = _OurStore(ledger, index=index, ttl=ttl)
            try:
                yield store
            finally:
                store.stop_ttl_sweeper()


class AsyncStoreStandIn:
    """``AsyncSqliteStore`` / ``AsyncPostgresStore`` as the tests use them."""

    MIGRATIONS: list[Any] = []

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls, _conn_string: str, *, index: Any = None, ttl: Any = None, **_options: Any
    ) -> AsyncIterator[AsyncLedgerStore]:
        async with AsyncLedger(_url()) as ledger:
            store = _OurAsyncStore(ledger, index=index, ttl=ttl)
            try:
                yield store
            finally:
                await store.stop_ttl_sweeper()


class _NoServer:
    """psycopg's ``Connection``/``AsyncConnection`` for the tests' CREATE and DROP
    DATABASE: agentledger's database exists already."""

    def __init__(self, *_: Any, **__: Any) -> None:
        pass

    @classmethod
    def connect(cls, *_: Any, **__: Any) -> _NoServer:
        return cls()

    def __enter__(self) -> _NoServer:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def __await__(self) -> Iterator[_NoServer]:
        yield from ()
        return self

    async def __aenter__(self) -> _NoServer:
        return self

    async def __aexit__(self, *_: object) -> None:
        return None

    def execute(self, *_: Any, **__: Any) -> _NoServer:
        return self


STAND_INS = {
    "SqliteStore": SyncStoreStandIn,
    "PostgresStore": SyncStoreStandIn,
    "AsyncSqliteStore": AsyncStoreStandIn,
    "AsyncPostgresStore": AsyncStoreStandIn,
    "Connection": _NoServer,
    "AsyncConnection": _NoServer,
}


def _emptied(url: str) -> None:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            connection.execute(text("DELETE FROM agentledger_memory_items"))
    finally:
        engine.dispose()


@pytest.fixture(autouse=True, params=[f"agentledger_{name}" for name in DATABASES])
def agentledger_database(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test's database, emptied, and the stand-ins in its module."""
    url = os.environ[f"AGENTLEDGER_SUITE_{request.param.removeprefix('agentledger_').upper()}_URL"]
    _emptied(url)
    _CURRENT["url"] = url
    for name, stand_in in STAND_INS.items():
        if hasattr(request.module, name):
            monkeypatch.setattr(request.module, name, stand_in)


@pytest.fixture
def fake_embeddings() -> Any:
    return CharacterEmbeddings(dims=500)


@pytest.fixture(scope="function")
async def conn() -> AsyncIterator[_NoServer]:
    yield _NoServer()


def pytest_configure(config: pytest.Config) -> None:
    """The SQLite package marks its TTL tests ``flaky`` (for pytest-retry, which is not
    installed here: each runs once, and must pass)."""
    config.addinivalue_line("markers", "flaky: retried by pytest-retry where installed")
