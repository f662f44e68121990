"""Two savers writing one thread at once never lose an acknowledged checkpoint or write,
a fork from a stale parent is visible as two children of one parent, and a read during
put and prune returns whole checkpoints."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import pytest
from langgraph.checkpoint.conformance.test_utils import (
    generate_checkpoint,
    generate_config,
    generate_metadata,
)

from agentledger.testing import tier

from ...contract._sql import statements_during
from ._writer import THREAD, task_id, write_chain_async, write_chain_sync
from .conftest import Saved, close, make_ledger, make_saver, settled

PUTS = 12


@tier("driver")
async def test_two_savers_on_one_thread_keep_every_acknowledged_checkpoint_and_write(
    saved: Saved,
) -> None:
    other_ledger = saved.ledger if saved.url is None else make_ledger(saved.mode, saved.url)
    other = make_saver(saved.mode, other_ledger)
    try:
        if saved.mode == "async":
            results = await asyncio.gather(
                write_chain_async(saved.saver, "a", PUTS), write_chain_async(other, "b", PUTS)
            )
        else:
            with ThreadPoolExecutor(2) as pool:
                futures = [
                    pool.submit(write_chain_sync, saver, name, PUTS)
                    for saver, name in ((saved.saver, "a"), (other, "b"))
                ]
                results = [future.result() for future in futures]
    finally:
        if other_ledger is not saved.ledger:
            await close(other_ledger)

    listed = [item async for item in saved.saver.alist(generate_config(THREAD))]
    ids = {item.config["configurable"]["checkpoint_id"] for item in listed}
    acknowledged = {config["configurable"]["checkpoint_id"] for done in results for config in done}
    assert ids == acknowledged and len(ids) == 2 * PUTS
    writes = {write[0] for item in listed for write in item.pending_writes or []}
    assert writes == {task_id(name, step) for name in "ab" for step in range(PUTS)}
    parents = [
        item.parent_config["configurable"]["checkpoint_id"] for item in listed if item.parent_config
    ]
    assert len(parents) == 2 * PUTS - 2  # each writer's first checkpoint has no parent


@tier("driver")
async def test_a_put_from_a_stale_parent_is_stored_and_shows_as_a_fork(saved: Saved) -> None:
    root = await saved.saver.aput(generate_config("t"), generate_checkpoint(), {}, {})
    from_root = generate_config("t", checkpoint_id=root["configurable"]["checkpoint_id"])
    first = await saved.saver.aput(from_root, generate_checkpoint(), generate_metadata(step=1), {})
    stale = await saved.saver.aput(from_root, generate_checkpoint(), generate_metadata(step=1), {})

    children = [
        item.config["configurable"]["checkpoint_id"]
        async for item in saved.saver.alist(generate_config("t"))
        if item.parent_config is not None
        and item.parent_config["configurable"]["checkpoint_id"]
        == root["configurable"]["checkpoint_id"]
    ]
    assert sorted(children) == sorted(
        [first["configurable"]["checkpoint_id"], stale["configurable"]["checkpoint_id"]]
    )


def _put_and_prune_sync(saver: Any, done: list[bool]) -> None:
    try:
        for step in range(PUTS):
            checkpoint = generate_checkpoint(
                channel_values={"v": step}, channel_versions={"v": step + 1}
            )
            saver.put(generate_config("pruned"), checkpoint, {"step": step}, {"v": step + 1})
            saver.prune(["pruned"])
    finally:
        done.append(True)


def _read_while_sync(saver: Any, done: list[bool]) -> list[Any]:
    seen = []
    while not done:
        found = saver.get_tuple(generate_config("pruned"))
        if found is not None:
            seen.append(found)
    return seen


async def _put_and_prune_async(saver: Any) -> None:
    for step in range(PUTS):
        checkpoint = generate_checkpoint(
            channel_values={"v": step}, channel_versions={"v": step + 1}
        )
        await saver.aput(generate_config("pruned"), checkpoint, {"step": step}, {"v": step + 1})
        await saver.aprune(["pruned"])


@tier("driver")
async def test_get_tuple_during_put_and_prune_returns_whole_checkpoints(saved: Saved) -> None:
    """Each checkpoint get_tuple returns has the channel value it names, although prune
    deletes the older checkpoints and their values meanwhile (one snapshot per read)."""
    other_ledger = saved.ledger if saved.url is None else make_ledger(saved.mode, saved.url)
    other = make_saver(saved.mode, other_ledger)
    try:
        if saved.mode == "async":
            writer = asyncio.ensure_future(_put_and_prune_async(other))
            seen = []
            while not writer.done():
                found = await saved.saver.aget_tuple(generate_config("pruned"))
                if found is not None:
                    seen.append(found)
            await writer
        else:
            done: list[bool] = []
            with ThreadPoolExecutor(2) as pool:
                writing = pool.submit(_put_and_prune_sync, other, done)
                reading = pool.submit(_read_while_sync, saved.saver, done)
                writing.result()
                seen = reading.result()
    finally:
        if other_ledger is not saved.ledger:
            await close(other_ledger)

    assert seen
    assert all(item.checkpoint["channel_values"] == {"v": item.metadata["step"]} for item in seen)


@tier("driver")
async def test_a_new_checkpoint_is_inserted_before_any_update_where_the_database_locks_gaps(
    saved: Saved,
) -> None:
    # InnoDB: an UPDATE of a missing key locks the gap the key would go in, where every
    # writer of a thread's next checkpoints inserts; writers that each took that lock
    # deadlock on their INSERTs (243 deadlocks in 5 runs of test_processes before).
    if saved.ledger.engine.dialect.name not in ("mysql", "mariadb"):
        pytest.skip("only MariaDB/MySQL lock the gap a missing key would go in")
    config = generate_config("gaps")
    config = await settled(saved.saver.aput(config, generate_checkpoint(), {}, {}))
    with statements_during(SimpleNamespace(ledger=saved.ledger)) as sent:  # type: ignore[arg-type]
        await settled(saved.saver.aput(config, generate_checkpoint(), {}, {}))
    touching = [
        sql.split()[0].upper()
        for sql, _ in sent
        if "agentledger_langgraph_checkpoints" in sql.split("WHERE")[0]
        and sql.split()[0].upper() in ("INSERT", "UPDATE")
    ]
    assert touching[:1] == ["INSERT"]
