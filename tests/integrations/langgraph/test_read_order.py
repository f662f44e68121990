"""What a read puts where: pending writes in LangGraph's order (task path, then task
id, then index), and in a page of ``list`` every value and write on its own
checkpoint. The reads are one statement whose rows share their columns by position
(``_AT_PART``); these pin what each position holds, on every backend."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.conformance.test_utils import generate_config

from .conftest import Saved

# Task ids in the opposite order of their task paths: the path decides first.
TASKS = [("task-c", "~a"), ("task-a", "~b"), ("task-b", "~b")]


def _checkpoint(saved: Saved, step: int, versions: dict[str, Any]) -> tuple[Any, Any]:
    new = {"notes": saved.saver.get_next_version(versions.get("notes"), None)}
    versions.update(new)
    checkpoint = {
        "v": 4,
        "id": f"1ef4f797-8335-6428-8001-{step:012d}",
        "ts": "2026-12-01T00:00:00+00:00",
        "channel_values": {"notes": f"the notes of step {step}, long enough for a row " * 3},
        "channel_versions": dict(versions),
        "versions_seen": {},
        "updated_channels": sorted(new),
    }
    return checkpoint, new


async def _thread_of_two(saved: Saved, thread: str) -> list[Any]:
    """Two checkpoints, each with writes of three tasks (two writes each, stored in
    no particular order); their configs."""
    versions: dict[str, Any] = {}
    config = generate_config(thread)
    stored = []
    for step in range(2):
        checkpoint, new = _checkpoint(saved, step, versions)
        config = await saved.saver.aput(config, checkpoint, {"step": step}, new)
        stored.append(config)
        for task_id, task_path in reversed(TASKS):
            writes = [("second", f"{task_id} {step} 1"), ("first", f"{task_id} {step} 0")]
            await saved.saver.aput_writes(config, writes[::-1], task_id, task_path)
    return stored


def _expected(step: int) -> list[tuple[str, str, Any]]:
    return [
        (task_id, channel, f"{task_id} {step} {idx}")
        for task_id, _ in TASKS
        for idx, channel in enumerate(("first", "second"))
    ]


async def test_pending_writes_read_back_by_task_path_then_task_id_then_index(
    saved: Saved,
) -> None:
    configs = await _thread_of_two(saved, "ordered")
    latest = await saved.saver.aget_tuple(generate_config("ordered"))
    first = await saved.saver.aget_tuple(configs[0])
    assert latest is not None and first is not None
    assert latest.pending_writes == _expected(1)
    assert first.pending_writes == _expected(0)


async def test_a_page_of_list_puts_every_value_and_write_on_its_own_checkpoint(
    saved: Saved,
) -> None:
    await _thread_of_two(saved, "paged")
    await _thread_of_two(saved, "other")  # its rows must not join the page's
    page = [found async for found in saved.saver.alist(generate_config("paged"), limit=10)]
    assert [found.metadata["step"] for found in page] == [1, 0]
    for found in page:
        step = found.metadata["step"]
        assert found.pending_writes == _expected(step)
        notes = found.checkpoint["channel_values"]["notes"]
        assert notes == f"the notes of step {step}, long enough for a row " * 3
