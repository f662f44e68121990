"""examples/langgraph_approval.py, run twice as two processes on every dialect: the
second run resumes the graph the first one paused."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import URL

from ...docs.test_examples import run_example

pytestmark = pytest.mark.slow  # the example runs in processes of its own


def test_the_approval_example_pauses_then_resumes_in_a_second_process(scratch_url: URL) -> None:
    first = run_example("langgraph_approval.py", scratch_url)
    second = run_example("langgraph_approval.py", scratch_url)

    assert first.startswith("paused: refund 120 EUR for order 1042?\nrun the script again")
    assert "is session langgraph." in first and first.rstrip().endswith(", 3 checkpoints")
    assert second.startswith("found the paused thread, waiting in approve\n")
    assert "resumed: approved by ada; refunded 120 EUR" in second
    assert second.rstrip().endswith(", 5 checkpoints")
