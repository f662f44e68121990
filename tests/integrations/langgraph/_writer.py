"""A writer of one shared thread: a chain of checkpoints, each on the one before it and
each with a pending write, through a sync or an async saver.

The concurrency tests run several at once: as threads or tasks of one process
(test_concurrent_savers) and as separate processes (test_processes), forked from the
test so that none pays for importing LangGraph again.
"""

from __future__ import annotations

import asyncio
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from typing import Any

from langgraph.checkpoint.conformance.test_utils import (
    generate_checkpoint,
    generate_config,
    generate_metadata,
)
from sqlalchemy.engine import URL, make_url

from agentledger import AsyncLedger, Ledger
from agentledger.integrations.langgraph import AsyncLedgerSaver, LedgerSaver

THREAD = "shared"


def _step(name: str, step: int, parent: dict[str, Any] | None) -> tuple[Any, ...]:
    """The arguments of ``put`` for step ``step`` of writer ``name``, on ``parent``."""
    config = generate_config(THREAD)
    if parent is not None:
        config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    values = {name: step}
    checkpoint = generate_checkpoint(channel_values=values, channel_versions={name: step + 1})
    return config, checkpoint, generate_metadata(step=step), {name: step + 1}


def task_id(name: str, step: int) -> str:
    """The task id of the pending write writer ``name`` stores at ``step``."""
    return f"task-{name}-{step}"


def write_chain_sync(saver: Any, name: str, steps: int) -> list[dict[str, Any]]:
    """Store ``steps`` checkpoints and a write on each; the configs acknowledged."""
    stored: list[dict[str, Any]] = []
    parent: dict[str, Any] | None = None
    for step in range(steps):
        parent = saver.put(*_step(name, step, parent))
        saver.put_writes(parent, [(name, step)], task_id(name, step))
        stored.append(parent)
    return stored


async def write_chain_async(saver: Any, name: str, steps: int) -> list[dict[str, Any]]:
    """``write_chain_sync`` through the async saver's methods."""
    stored: list[dict[str, Any]] = []
    parent: dict[str, Any] | None = None
    for step in range(steps):
        parent = await saver.aput(*_step(name, step, parent))
        await saver.aput_writes(parent, [(name, step)], task_id(name, step))
        stored.append(parent)
    return stored


def _ids(configs: list[dict[str, Any]]) -> list[str]:
    return [config["configurable"]["checkpoint_id"] for config in configs]


def _in_sync_process(url: URL, name: str, steps: int, barrier: Barrier) -> list[str]:
    with Ledger(url) as ledger:
        ledger.sessions.exists("warm-up")  # connect before the start
        barrier.wait()
        return _ids(write_chain_sync(LedgerSaver(ledger), name, steps))


async def _in_async_process(url: URL, name: str, steps: int, barrier: Barrier) -> list[str]:
    async with AsyncLedger(url) as ledger:
        await ledger.sessions.exists("warm-up")
        barrier.wait()
        return _ids(await write_chain_async(AsyncLedgerSaver(ledger), name, steps))


def write_in_process(
    url: str, mode: str, name: str, steps: int, barrier: Barrier, results: Queue[Any]
) -> None:
    """A process's body: write a chain through a saver of ``mode`` at ``url``; put
    ``(name, acknowledged checkpoint ids)`` on ``results``, or the error that stopped
    the writer, so the test fails instead of waiting."""
    try:
        if mode == "async":
            ids = asyncio.run(_in_async_process(make_url(url), name, steps, barrier))
        else:
            ids = _in_sync_process(make_url(url), name, steps, barrier)
        results.put((name, ids))
    except BaseException as error:
        results.put(f"writer {name}: {error!r}")
        raise
