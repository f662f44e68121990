"""One ``AsyncLedgerSaver`` shared by threads, each running graphs on an event loop of
its own, and used by ``asyncio.run`` after ``asyncio.run``: every checkpoint and write
stored once, nothing hangs."""

from __future__ import annotations

import asyncio

from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_config

from agentledger import AsyncLedger
from agentledger.integrations.langgraph import AsyncLedgerSaver

from ...loops import in_threads, one_after_another

THREADS, STEPS = 5, 4


async def run_thread(saver: AsyncLedgerSaver, thread_id: str, steps: int) -> int:
    config = generate_config(thread_id)
    for step in range(steps):
        checkpoint = generate_checkpoint(
            channel_values={"v": step}, channel_versions={"v": step + 1}
        )
        config = await saver.aput(config, checkpoint, {"step": step}, {"v": step + 1})
        await saver.aput_writes(config, [("v", step)], f"task-{step}")
    return steps


def test_threads_each_on_its_own_loop_store_their_threads_through_one_saver(
    each_database: str,
) -> None:
    ledger = AsyncLedger(each_database)
    saver = AsyncLedgerSaver(ledger)
    assert sum(in_threads(THREADS, lambda i: run_thread(saver, f"t{i}", STEPS))) == THREADS * STEPS

    async def history(i: int) -> list[int]:
        listed = [item async for item in saver.alist(generate_config(f"t{i}"))]
        return [item.metadata["step"] for item in listed]

    for i in range(THREADS):
        assert asyncio.run(history(i)) == list(reversed(range(STEPS)))
    asyncio.run(ledger.close())


def test_one_saver_serves_asyncio_run_after_asyncio_run(each_database: str) -> None:
    ledger = AsyncLedger(each_database)
    saver = AsyncLedgerSaver(ledger)

    async def resume(i: int) -> int:
        await run_thread(saver, "runs", 1)
        found = await saver.aget_tuple(generate_config("runs"))
        assert found is not None
        return len([item async for item in saver.alist(generate_config("runs"))])

    assert one_after_another(3, resume) == [1, 2, 3]
    asyncio.run(ledger.close())
