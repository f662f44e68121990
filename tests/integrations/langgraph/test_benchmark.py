"""The side-by-side benchmark (benchmarks/langgraph.py) runs end to end on short threads,
so it cannot rot; no time is judged. Its targets are judged from the measured ratios."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from benchmarks.langgraph import FLAT, OPERATIONS, targets

from ...databases import bench_url

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_the_benchmark_times_every_operation_of_both_savers_on_every_database(
    tmp_path: Path,
) -> None:
    out = tmp_path / "langgraph.json"
    command = [sys.executable, "-m", "benchmarks.langgraph", "--steps", "3,12", "--rounds", "1"]
    url = bench_url("postgresql", "_bench_lg")
    command += ["--no-postgres"] if url is None else ["--postgres-url", url]
    done = subprocess.run(
        [*command, "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )

    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(out.read_text())
    databases = ["sqlite"] if url is None else ["sqlite", "postgresql"]
    rows = {(r["database"], r["saver"], r["checkpoints"]): r for r in report["results"]}
    assert set(rows) == {
        (database, saver, n)
        for database in databases
        for saver in ("agentledger", "langgraph")
        for n in (3, 12)
    }
    timed = (*OPERATIONS, "get_tuple_old_side_by_side")
    assert all(row[op] > 0 for row in rows.values() for op in timed)
    assert all(row["bytes_per_step"] >= 0 for row in rows.values())  # 0: no page added
    assert len(report["targets"]) == len(databases) * (2 * len(OPERATIONS) + 2)
    assert "| list(limit=10) | put, new thread | bytes per step |" in done.stdout
    assert "targets met." in done.stdout


def _judged(measured: dict[tuple[str, int], tuple[float, float]]) -> dict[str, Any]:
    """The targets of a SQLite run whose every operation of (saver, checkpoints) took
    the given milliseconds and stored the given bytes per step, by target."""
    results = [
        {
            "database": "sqlite",
            "saver": saver,
            "checkpoints": checkpoints,
            "bytes_per_step": size,
            **dict.fromkeys((*OPERATIONS, "get_tuple_old_side_by_side"), ms),
        }
        for (saver, checkpoints), (ms, size) in measured.items()
    ]
    return {found["target"]: found for found in targets(results)}


def test_a_target_is_met_at_the_built_in_savers_time_and_missed_above_it() -> None:
    found = _judged(
        {
            ("agentledger", 10): (1.0, 50),
            ("langgraph", 10): (1.0, 100),
            ("agentledger", 1000): (1.01, 100),
            ("langgraph", 1000): (1.0, 100),
        }
    )

    assert found["put at 10, vs LangGraph's"]["met"] is True
    assert found["put at 1,000, vs LangGraph's"]["met"] is False
    assert found["get_tuple old at 1,000 vs at 10"]["met"] is True  # 1.01x is within FLAT
    assert found["bytes per step at 1,000, vs LangGraph's"]["met"] is False  # equal: not fewer


def test_bytes_per_step_are_not_fewer_than_a_built_in_savers_that_added_none() -> None:
    found = _judged(
        {
            ("agentledger", 3): (1.0, 0),
            ("langgraph", 3): (1.0, 0),
            ("agentledger", 12): (1.0, 10),
            ("langgraph", 12): (1.0, 0),
        }
    )

    size = found["bytes per step at 12, vs LangGraph's"]
    assert size["measured"] == math.inf and size["met"] is False


def test_get_tuple_growing_past_flat_from_the_shortest_thread_to_the_longest_is_missed() -> None:
    found = _judged(
        {
            ("agentledger", 10): (1.0, 50),
            ("langgraph", 10): (1.0, 100),
            ("agentledger", 1000): (FLAT + 0.01, 50),
            ("langgraph", 1000): (9.0, 100),
        }
    )

    flat = found["get_tuple old at 1,000 vs at 10"]
    assert flat["measured"] == pytest.approx(FLAT + 0.01) and flat["met"] is False
    assert flat["limit"] == f"<= {FLAT:.2f}x"
