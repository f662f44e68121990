"""The side-by-side benchmark (benchmarks/openai_agents.py) runs end to end in its
quick mode; no time is judged, only what its writers stored."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the benchmark runs end to end
ROOT = Path(__file__).resolve().parents[3]


def test_the_benchmark_compares_every_store_and_no_writer_loses_an_item(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.openai_agents", "--quick", url],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["sqlite"]
    assert set(report) == {
        "LedgerSession",
        "LedgerSession refuse",
        "SDK SQLAlchemySession",
        "SDK SQLiteSession",
    }
    assert all(store["writers"]["lost"] == 0 for store in report.values())
    assert report["LedgerSession refuse"]["writers"]["accepted_on_unseen_history"] == 0
    assert set(report["LedgerSession"]["latency_ms"]) == {"add_items_2", "get_items_20", "pop_item"}
