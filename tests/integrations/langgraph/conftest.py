"""The ``saved`` fixture: a LangGraph saver on the targets of each test's tier
(tests/backends.py), the sync ``LedgerSaver`` for a sync target and the
``AsyncLedgerSaver`` for an async one.

Server databases are migrated once per run and emptied after each test; the in-memory
backend gets a fresh private store per test, copied from a migrated template.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy.engine import URL

from agentledger import AsyncLedger, Ledger
from agentledger.integrations.langgraph import AsyncLedgerSaver, LedgerSaver

from ...backends import Target, parametrize_targets
from ...databases import empty_tables, memory_ledger, migrated_once

SYNC_UNIT_ONLY = (
    "the sync API only: it runs the saver's repository in a sync unit of work, which an "
    "async ledger does not have"
)
"""The skip reason of a test that needs a sync unit of work."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_targets(metafunc, "saved")


@dataclass
class Saved:
    """A saver under test and how to open another one on the same database."""

    saver: LedgerSaver | AsyncLedgerSaver
    mode: str
    name: str
    url: URL | None
    """The database's URL for this mode (None for an in-memory store)."""
    ledger: Any

    def reopen_url(self) -> URL:
        """The URL a second saver (or process) opens; skips for an in-memory store."""
        if self.url is None:
            pytest.skip(
                "a database file or server only: it opens the store a second time, which an "
                "in-memory store cannot be"
            )
        return self.url


def make_saver(mode: str, ledger: Any) -> LedgerSaver | AsyncLedgerSaver:
    """The saver of ``mode`` on ``ledger``."""
    return AsyncLedgerSaver(ledger) if mode == "async" else LedgerSaver(ledger)


def make_ledger(mode: str, url: URL) -> Any:
    """A ledger of ``mode`` at ``url``."""
    return AsyncLedger(url) if mode == "async" else Ledger(url)


async def settled(value: Any) -> Any:
    """``value``, awaited when a call of an async ledger gave an awaitable."""
    return await value if inspect.isawaitable(value) else value


async def close(ledger: Any) -> None:
    """Close a ledger of either mode."""
    if isinstance(ledger, AsyncLedger):
        await ledger.close()
    else:
        ledger.close()


@pytest.fixture
async def saved(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Saved]:
    target: Target = request.param
    mode, name = target.mode, target.name
    if target.backend.in_memory:
        ledger: Any = memory_ledger(mode)
        try:
            yield Saved(make_saver(mode, ledger), mode, name, None, ledger)
        finally:
            await close(ledger)
        return
    base = migrated_once(target.dialect, tmp_path_factory)
    url = target.url_for(base)
    ledger = make_ledger(mode, url)
    try:
        yield Saved(make_saver(mode, ledger), mode, name, url, ledger)
    finally:
        await close(ledger)
        empty_tables(base)
