"""The examples run as tests, so they cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_example(name: str, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("example", ["quickstart_async.py", "quickstart_sync.py"])
def test_the_quickstart_resumes_its_session_in_a_second_run(example: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/quickstart.db"
    first = run_example(example, url)
    assert "created session trip-planner" in first
    assert "resumed trip-planner: run #1" in first
    second = run_example(example, url)
    assert "found session trip-planner at revision 2" in second
    assert "resumed trip-planner: run #2" in second
