"""The ADK side-by-side benchmark's quick mode runs end to end, so it cannot rot.

No timing is judged: the run must finish and report every operation for both
services.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
@pytest.mark.sqlite
def test_the_quick_adk_benchmark_reports_every_operation_for_both_services(
    tmp_path: Path,
) -> None:
    command = [sys.executable, "-m", "benchmarks.adk", "--quick", "--databases", "sqlite"]
    done = subprocess.run(
        [*command, "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-4000:]
    (result,) = json.loads((tmp_path / "adk.json").read_text())
    keys = [op["key"] for op in result["operations"]]
    assert keys == ["append_event", "append_event_scoped", "get_all", "get_last_20", "list"]
    assert all(op["agentledger_ms"] > 0 and op["adk_ms"] > 0 for op in result["operations"])
    assert (
        "| SQLite (file) | list_sessions, 30 sessions of one user |"
        in (tmp_path / "adk.md").read_text()
    )
