"""The SQL a LangGraph read and write send: get_tuple is one statement on PostgreSQL
(whose reads run in AUTOCOMMIT, so one statement is one snapshot), and neither read
nor write grows with the thread's length."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_config

from ..contract._sql import statements_during, work
from .conftest import Saved


async def _thread(saved: Saved, thread_id: str, length: int) -> dict[str, Any]:
    config = generate_config(thread_id)
    for step in range(length):
        checkpoint = generate_checkpoint(
            channel_values={"v": step}, channel_versions={"v": step + 1}
        )
        config = await saved.saver.aput(config, checkpoint, {"step": step}, {"v": step + 1})
        await saved.saver.aput_writes(config, [("v", step)], f"task-{step}")
    return config


def _sent(saved: Saved) -> Any:
    return statements_during(SimpleNamespace(ledger=saved.ledger))  # type: ignore[arg-type]


async def test_get_tuple_sends_as_many_statements_at_30_checkpoints_as_at_one(
    saved: Saved,
) -> None:
    await _thread(saved, "one", 1)
    await _thread(saved, "many", 30)
    counts = []
    for thread_id in ("one", "many"):
        with _sent(saved) as statements:
            found = await saved.saver.aget_tuple(generate_config(thread_id))
        assert found is not None and found.pending_writes
        counts.append(len(work(statements)))
    one_statement = saved.ledger.engine.dialect.name == "postgresql"
    assert counts == ([1, 1] if one_statement else [2, 2])


async def test_put_on_an_existing_thread_sends_as_many_statements_at_30_checkpoints_as_at_one(
    saved: Saved,
) -> None:
    counts = []
    for thread_id, length in (("one", 1), ("many", 30)):
        config = await _thread(saved, thread_id, length)
        checkpoint = generate_checkpoint(channel_values={"v": 99}, channel_versions={"v": 99})
        with _sent(saved) as statements:
            await saved.saver.aput(config, checkpoint, {"step": 99}, {"v": 99})
        counts.append(len(work(statements)))
    assert counts[0] == counts[1]
    if saved.ledger.engine.dialect.name == "postgresql":
        assert counts == [2, 2]  # the session touched, then values and checkpoint at once
