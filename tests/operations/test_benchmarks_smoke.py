"""The benchmark's quick mode runs end to end, so the suite cannot rot.

No timing is judged here: the run must finish, report every operation on every
database it ran on, count statements, and lose no update among concurrent writers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks import per_call, saver_budget

from ..databases import bench_url

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = {
    "append_message_10",
    "append_message_100",
    "append_message_1000",
    "append_steps_1",
    "append_steps_100",
    "load_all",
    "load_last_50",
    "usage_steps",
    "list_first",
    "list_deep",
    "checkpoint_save_100000",
    "checkpoint_latest_100000",
    "checkpoint_save_1000000",
    "checkpoint_latest_1000000",
}


@pytest.mark.slow
def test_the_quick_benchmark_runs_every_part_on_every_configured_database(
    tmp_path: Path,
) -> None:
    databases = ["sqlite"]
    command = [sys.executable, "-m", "benchmarks", "--quick", "--out", str(tmp_path)]
    for name, flag in (("postgresql", "--postgres-url"), ("mysql", "--mysql-url")):
        url = bench_url(name)
        if url is not None:
            databases.append(name)
            command += [flag, url]
    command += ["--databases", ",".join(databases)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]

    results = json.loads((tmp_path / "results.json").read_text())
    assert [result["dialect"] for result in results] == databases
    for result in results:
        operations = {op["key"]: op for op in result["operations"]}
        assert set(operations) == OPERATIONS
        for op in operations.values():
            assert all(op["ms"][v]["median"] > 0 for v in ("agentledger", "core", "raw"))
        assert operations["append_message_10"]["statements"]["agentledger"] >= 1
        for variant in ("agentledger", "core", "raw"):
            assert result["concurrency"][variant]["lost_updates"] == 0
            assert result["concurrency"][variant]["max_tries"] >= 1
        for variant in ("agentledger", "raw"):
            assert result["stream"][variant]["complete"]
    assert "### Targets" in (tmp_path / "results.md").read_text()

    conversations = json.loads((tmp_path / "conversations.json").read_text())
    assert [result["dialect"] for result in conversations] == [
        name for name in databases if name != "mysql"
    ]
    for result in conversations:
        for cell in result["cells"]:
            stores = set(cell["ms"])
            assert {"agentledger", "SDK SQLAlchemySession", "ADK DatabaseSessionService"} <= stores
            assert ("raw driver" in stores) == (cell["operation"] == "load")
            assert ("SDK SQLiteSession" in stores) == (result["dialect"] == "sqlite")
            assert all(value > 0 for value in cell["ms"].values())
    assert "| SQLite | load 20 items |" in done.stdout

    langgraph = json.loads((tmp_path / "langgraph.json").read_text())
    savers = {(row["database"], row["saver"]) for row in langgraph["results"]}
    assert {("sqlite", "agentledger"), ("sqlite", "langgraph")} <= savers
    assert ("postgresql" in databases) == (("postgresql", "langgraph") in savers)
    assert all(target["measured"] >= 0 for target in langgraph["targets"])
    assert "| sqlite | put at 12, vs LangGraph's |" in done.stdout

    budget = json.loads((tmp_path / "budget.json").read_text())
    on_postgres = "postgresql" in databases
    assert ("PostgreSQL, AsyncLedger" in budget["messages.all"]) == on_postgres
    assert ("PostgreSQL" in budget["saver"]) == on_postgres
    for rungs in budget["messages.all"].values():
        assert all(rungs[rung] > 0 for rung in per_call.RUNGS)
    for calls in budget["saver"].values():
        assert set(calls) == set(saver_budget.CALLS)
        for rungs in calls.values():
            assert all(rungs[rung] > 0 for rung in (*saver_budget.RUNGS, "langgraph"))
    assert "## Two saver calls, layer by layer" in done.stdout


@pytest.mark.slow
def test_the_viewers_quick_benchmark_measures_every_page(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "benchmarks.ui", "--quick", "--databases", "sqlite"]
    done = subprocess.run(
        [*command, "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-4000:]
    (result,) = json.loads((tmp_path / "ui.json").read_text())
    assert len(result["pages"]) == 10
    assert all(page["median_ms"] > 0 and page["bytes"] > 0 for page in result["pages"])
