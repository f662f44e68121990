"""The examples run as tests, on every dialect, so they cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sqlalchemy.engine import URL

ROOT = Path(__file__).resolve().parents[1]


def run_example(name: str, url: URL) -> str:
    plain = url.set(drivername=url.get_backend_name())  # the example picks its driver
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), plain.render_as_string(False)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_async_quickstart_resumes_and_continues_the_conversation(scratch_url: URL) -> None:
    first = run_example("quickstart_async.py", scratch_url)
    assert "created session trip-planner with 0 messages" in first
    assert "#2 assistant: (answer 1)" in first
    second = run_example("quickstart_async.py", scratch_url)
    assert "found session trip-planner with 2 messages" in second
    assert "resumed trip-planner after 2 turn(s)" in second
    assert "#4 assistant: (answer 2) You asked: 'And on Tuesday?'" in second


def test_the_sync_quickstart_continues_what_the_async_one_began(scratch_url: URL) -> None:
    run_example("quickstart_async.py", scratch_url)
    second = run_example("quickstart_sync.py", scratch_url)
    assert "found session trip-planner with 2 messages" in second
    assert "#3 user: And on Tuesday?" in second


def test_the_conflict_example_shows_one_conflict_and_no_lost_message(scratch_url: URL) -> None:
    out = run_example("two_writers_conflict.py", scratch_url)
    assert "writer B got ConflictError (reason=stale); nothing of B stored" in out
    assert out.rstrip().endswith("#1 from A\n  #2 from B")


def test_the_join_example_commits_or_rolls_back_both_rows(scratch_url: URL) -> None:
    out = run_example("join_app_transaction.py", scratch_url)
    assert "orders (1): ['umbrella']" in out
    assert "agent messages: ['Ordered umbrella for you.']" in out
