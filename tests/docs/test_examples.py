"""The examples run as tests, on every dialect, so they cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import URL

from agentledger.cli import EXIT_OK, main

pytestmark = pytest.mark.slow  # each example runs in a process of its own
ROOT = Path(__file__).resolve().parents[2]


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


def test_the_async_quickstart_pauses_and_resumes_from_a_checkpoint(scratch_url: URL) -> None:
    first = run_example("quickstart_async.py", scratch_url)
    assert "created session trip-planner with 0 messages" in first
    assert "turn 1: the model wants tool:museum-search; paused at checkpoint #1" in first
    assert "resumed from checkpoint #1: ada approved tool:museum-search for call-1" in first
    assert "#4 assistant: Good news: Open on day 1: Gulbenkian, MAAT." in first
    assert "trip-planner   Planning a trip to Lisbon    completed     4     2     52" in first


def test_a_second_run_finds_the_conversation_and_the_approval(scratch_url: URL) -> None:
    run_example("quickstart_async.py", scratch_url)
    second = run_example("quickstart_async.py", scratch_url)
    assert "found session trip-planner with 4 messages at revision 5" in second
    assert "turn 2: tool:museum-search was approved before; no need to ask again" in second
    assert "#8 assistant: Good news: Open on day 2: Gulbenkian, MAAT." in second
    assert "completed     8     4    144" in second


def test_the_sync_quickstart_continues_what_the_async_one_began(scratch_url: URL) -> None:
    run_example("quickstart_async.py", scratch_url)
    second = run_example("quickstart_sync.py", scratch_url)
    assert "found session trip-planner with 4 messages at revision 5" in second
    assert "#7 tool: Open on day 2: Gulbenkian, MAAT" in second


def test_the_sync_quickstart_pauses_and_resumes_on_its_own(scratch_url: URL) -> None:
    first = run_example("quickstart_sync.py", scratch_url)
    assert "paused at checkpoint #1" in first
    assert "resumed from checkpoint #1" in first


def test_the_conflict_example_shows_one_conflict_and_no_lost_message(scratch_url: URL) -> None:
    out = run_example("two_writers_conflict.py", scratch_url)
    assert "writer B got ConflictError (reason=stale); nothing of B stored" in out
    assert out.rstrip().endswith("#1 from A\n  #2 from B")


def test_the_join_example_commits_or_rolls_back_both_rows(scratch_url: URL) -> None:
    out = run_example("join_app_transaction.py", scratch_url)
    assert "orders (1): ['umbrella']" in out
    assert "agent messages: ['Ordered umbrella for you.']" in out


def test_the_openai_agents_example_remembers_the_conversation_across_runs(
    scratch_url: URL,
) -> None:
    first = run_example("openai_agents_session.py", scratch_url)
    assert "session ada-lisbon-trip holds 0 items" in first
    assert "< Good news: sunny, 24°C in Lisbon." in first
    assert "now 6 items; 4 steps, 135 tokens" in first
    second = run_example("openai_agents_session.py", scratch_url)
    assert "session ada-lisbon-trip holds 6 items" in second
    assert "< I have 11 items of our conversation in mind." in second
    assert "now 12 items; 8 steps, 486 tokens" in second


def test_the_openai_agents_example_prints_ids_that_sessions_show_finds(
    scratch_url: URL, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_example("openai_agents_session.py", scratch_url)
    (line,) = [line for line in out.splitlines() if line.startswith("agentledger session ")]
    id, key = line.removeprefix("agentledger session ").split(", key ")
    assert key == "ada-lisbon-trip"
    url = scratch_url.render_as_string(hide_password=False)
    for given in (id, key):
        assert main(["sessions", "show", given, "--url", url]) == EXIT_OK
        assert capsys.readouterr().out.startswith(f"session   {id}\nkey       {key}\n")


def test_the_adk_example_runs_a_turn_and_a_second_process_goes_on_from_it(
    scratch_url: URL,
) -> None:
    first = run_example("adk_session.py", scratch_url)
    assert "created session lisbon-trip" in first
    assert "booker: Booked Lisbon, seat 11A." in first
    assert "state: {'app:bookings': 1, 'booked': 'Lisbon', 'user:home': 'Porto'}" in first
    assert "in the ledger: made by 'adk', 4 messages, revision 5" in first
    second = run_example("adk_session.py", scratch_url)
    assert "found session lisbon-trip with 4 events" in second
    assert "booker: Booked Lisbon, seat 12A." in second
    assert "in the ledger: made by 'adk', 8 messages, revision 9" in second
