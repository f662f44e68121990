"""A graph that writes and reads long-term memory through ``store=`` in its nodes, with
``LedgerSaver`` beside ``LedgerStore`` on one ledger: paused at an interrupt in one
process, resumed in another, which reads the memory the first stored."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentledger import AsyncLedger

from .conftest import Saved, settled

GRAPH = Path(__file__).with_name("_memory_graph.py")


def _run(url: str, mode: str, step: str) -> str:
    done = subprocess.run(
        [sys.executable, str(GRAPH), url, mode, step],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.api("sync")
async def test_a_graph_resumed_in_a_new_process_reads_the_memory_it_stored(
    saved: Saved,
) -> None:
    await _resumed_in_a_new_process(saved)


@pytest.mark.api("async")
async def test_an_async_graph_resumed_in_a_new_process_reads_the_memory_it_stored(
    saved: Saved,
) -> None:
    await _resumed_in_a_new_process(saved)


async def _resumed_in_a_new_process(saved: Saved) -> None:
    url = saved.reopen_url().render_as_string(hide_password=False)

    paused = _run(url, saved.mode, "start")
    resumed = _run(url, saved.mode, "resume")

    assert paused == "('ask',)"
    assert resumed == "pasta with soup"
    stored = await settled(saved.ledger.memory.get(("memories", "ada"), "food"))
    assert stored.value == {"likes": "soup"} and stored.revision == 1
    if isinstance(saved.ledger, AsyncLedger):
        assert (await saved.ledger.memory.search(("memories",)))[0].key == "food"
