"""Eight writers add items to one SDK session at once, as the first items of a session
nobody has created yet: none is lost, none fails, none deadlocks, and every writer's
batches keep their order and stay whole."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from agentledger.integrations.openai_agents import LedgerSession
from agentledger.testing import tier

from ._writers import batch, write
from .conftest import Store

ROOT = Path(__file__).resolve().parents[3]
WRITERS, BATCHES, PROCESSES = 8, 4, 2


def assert_whole_and_in_order(items: list[dict[str, object]], writers: list[str]) -> None:
    by_writer: dict[str, list[dict[str, object]]] = defaultdict(list)
    for item in items:
        by_writer[str(item["content"]).split(" ")[0]].append(item)
    assert sorted(by_writer) == sorted(writers)
    for writer, written in by_writer.items():
        assert written == [item for n in range(BATCHES) for item in batch(writer, n)]
    pairs = [items[i : i + 2] for i in range(0, len(items), 2)]
    assert all(str(q["content"]).split()[0] == str(a["content"]).split()[0] for q, a in pairs)


@tier("driver")
async def test_eight_writers_in_one_process_lose_nothing(store: Store) -> None:
    writers = [f"w{n}" for n in range(WRITERS)]
    done = await asyncio.gather(*(write(store.ledger, "shared", w, BATCHES) for w in writers))
    assert sum(done) == WRITERS * BATCHES
    items = await LedgerSession("shared", store.ledger).get_items()
    assert len(items) == 2 * WRITERS * BATCHES
    assert_whole_and_in_order(items, writers)
    record = await LedgerSession("shared", store.ledger).record()
    assert record.message_count == record.message_seq == len(items)


@pytest.mark.slow
@pytest.mark.databases("sqlite", "postgresql")
async def test_eight_writers_in_two_processes_lose_nothing(
    shared_store: Store, tmp_path: Path
) -> None:
    """On a SQLite file and on PostgreSQL (the in-process test covers MariaDB too)."""
    assert shared_store.url is not None
    start = tmp_path / "start"
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.integrations.openai_agents._writers",
                shared_store.url,
                "shared",
                f"p{p}",
                str(WRITERS // PROCESSES),
                str(BATCHES),
            ],
            cwd=ROOT,
            env={**os.environ, "START_FILE": str(start)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in range(PROCESSES)
    ]
    await asyncio.sleep(0.5)  # let them import; the start file releases them together
    start.touch()
    outcomes = [process.communicate(timeout=180) for process in processes]
    for process, (out, err) in zip(processes, outcomes, strict=True):
        assert process.returncode == 0, err
        assert out.strip() == str(WRITERS // PROCESSES * BATCHES)
    items = await LedgerSession("shared", shared_store.ledger).get_items()
    assert len(items) == 2 * WRITERS * BATCHES
    assert_whole_and_in_order(
        items, [f"p{p}.{w}" for p in range(PROCESSES) for w in range(WRITERS // PROCESSES)]
    )


@tier("driver")
async def test_concurrent_pops_return_each_item_exactly_once(store: Store) -> None:
    items = [{"role": "user", "content": f"item {n}"} for n in range(WRITERS)]
    await LedgerSession("shared", store.ledger).add_items(items)
    poppers = [LedgerSession("shared", store.ledger) for _ in range(WRITERS + 2)]
    popped = await asyncio.gather(*(session.pop_item() for session in poppers))
    got = [item for item in popped if item is not None]
    assert sorted(str(item["content"]) for item in got) == sorted(
        f"item {n}" for n in range(WRITERS)
    )
    assert popped.count(None) == 2
    assert await LedgerSession("shared", store.ledger).get_items() == []
