"""agentledger's savers as LangGraph's own test fixtures.

Copied into the tests folder of LangGraph's source distribution as
``conftest_agentledger.py`` and imported at the end of its ``conftest.py``, so these
``sync_checkpointer`` and ``async_checkpointer`` fixtures replace LangGraph's: each
runs the test on LangGraph's ``SqliteSaver`` (the reference, ids ``sqlitesaver`` and
``asyncsqlitesaver``) and on agentledger's savers of each database
``AGENTLEDGER_SUITE_DATABASES`` names (``agentledger_<database>``, with ``_aio`` for
the async saver). A PostgreSQL saver uses the migrated database
``AGENTLEDGER_SUITE_POSTGRES_URL``; each test's threads are in a scope of their own
(``app_name``), so tests never see each other's threads.

Only the tests that take one of these fixtures are collected: the rest of LangGraph's
suite does not touch a saver.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver

from agentledger import AsyncLedger, Ledger
from agentledger.integrations.langgraph import AsyncLedgerSaver, LedgerSaver
from tests.conftest_checkpointer import _checkpointer_sqlite, _checkpointer_sqlite_aio

DATABASES = [name for name in os.environ["AGENTLEDGER_SUITE_DATABASES"].split(",") if name]
SAVER_FIXTURES = ("sync_checkpointer", "async_checkpointer")
REFERENCE = "sqlitesaver"
"""The id of LangGraph's ``SqliteSaver`` (not ``sqlite``: other fixtures, the cache's,
have a parameter of that name)."""
ASYNC_REFERENCE = "asyncsqlitesaver"


def _ledger_url(database: str) -> str | None:
    """The URL of ``database`` (None: an in-memory store)."""
    if database == "sqlite":
        return None
    return os.environ[f"AGENTLEDGER_SUITE_{database.upper()}_URL"]


WARM_UP = {"configurable": {"thread_id": "warm-up"}}
"""A thread no test writes, read once before a test: an in-memory ledger migrates and
every ledger checks its schema at its first call, as LangGraph's fixtures run their
savers' ``setup()`` before the test (stream tests time their first event to 0.1 s,
which a migration on a loaded host overran)."""


def _scope() -> str:
    """A new scope's name (from ``secrets``: some tests patch ``uuid.uuid4`` to make
    LangGraph's ids predictable, and a fixture must not take one of them)."""
    return f"suite-{secrets.token_hex(6)}"


@pytest.fixture(params=[REFERENCE, *(f"agentledger_{name}" for name in DATABASES)])
def sync_checkpointer(request: pytest.FixtureRequest) -> Iterator[BaseCheckpointSaver[Any]]:
    if request.param == REFERENCE:
        with _checkpointer_sqlite() as reference:
            yield reference
        return
    url = _ledger_url(request.param.removeprefix("agentledger_"))
    ledger = Ledger.in_memory() if url is None else Ledger(url)
    try:
        saver = LedgerSaver(ledger, app_name=_scope())
        saver.get_tuple(WARM_UP)
        yield saver
    finally:
        ledger.close()


@pytest.fixture(params=[ASYNC_REFERENCE, *(f"agentledger_{name}_aio" for name in DATABASES)])
async def async_checkpointer(
    request: pytest.FixtureRequest,
) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    if request.param == ASYNC_REFERENCE:
        async with _checkpointer_sqlite_aio() as reference:
            yield reference
        return
    url = _ledger_url(request.param.removeprefix("agentledger_").removesuffix("_aio"))
    ledger = AsyncLedger.in_memory() if url is None else AsyncLedger(url)
    try:
        async_saver = AsyncLedgerSaver(ledger, app_name=_scope())
        await async_saver.aget_tuple(WARM_UP)
        yield async_saver
    finally:
        await ledger.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the tests that run a graph over a saver of these fixtures."""
    kept, left = [], []
    for item in items:
        uses_a_saver = set(SAVER_FIXTURES) & set(getattr(item, "fixturenames", ()))
        (kept if uses_a_saver else left).append(item)
    config.hook.pytest_deselected(items=left)
    items[:] = kept
