"""The SDK's own concurrency pattern (``test_sqlite_session_concurrent_access``): one
``LedgerSession`` shared by threads, each adding items on an event loop of its own;
and one session used by ``asyncio.run`` after ``asyncio.run``. Nothing is lost, each
writer's batches stay whole and in order, nothing hangs."""

from __future__ import annotations

import asyncio

from agentledger import AsyncLedger
from agentledger.integrations.openai_agents import LedgerSession

from ...loops import in_threads, one_after_another
from ._writers import batch
from .test_concurrency import assert_whole_and_in_order

THREADS, BATCHES = 5, 4


def test_threads_each_on_its_own_loop_add_items_to_one_shared_session(
    each_database: str,
) -> None:
    ledger = AsyncLedger(each_database)
    session = LedgerSession("shared", ledger)

    async def add(i: int) -> int:
        for n in range(BATCHES):
            await session.add_items(batch(f"t{i}", n))
        return BATCHES

    assert sum(in_threads(THREADS, add)) == THREADS * BATCHES
    items = asyncio.run(session.get_items())
    assert len(items) == 2 * THREADS * BATCHES
    assert_whole_and_in_order(items, [f"t{i}" for i in range(THREADS)])
    asyncio.run(ledger.close())


def test_one_session_serves_asyncio_run_after_asyncio_run(each_database: str) -> None:
    ledger = AsyncLedger(each_database)
    session = LedgerSession("runs", ledger)

    async def turn(i: int) -> int:
        await session.add_items(batch("r", i))
        return len(await session.get_items())

    assert one_after_another(3, turn) == [2, 4, 6]
    asyncio.run(ledger.close())
