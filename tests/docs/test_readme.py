"""The README tells the truth: its quickstart code runs, its demo output is real."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def test_the_quickstart_code_runs_and_prints_the_session(tmp_path: Path) -> None:
    (code,) = re.findall(r"```python\n(.*?)```", section("Quickstart"), re.S)[:1]
    script = tmp_path / "readme_quickstart.py"
    script.write_text(code)
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "trip-planner",
        "Planning",
        "a",
        "trip",
        "to",
        "Lisbon",
        "completed",
        "2",
        "44",
    ]


def test_the_demo_output_shown_is_what_the_demo_prints(tmp_path: Path) -> None:
    shown = re.search(r"\$ python3 dev.py demo\n(.*?)```", README, re.S)
    assert shown is not None
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart_async.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == shown.group(1)


def run_first_block_after(heading: str, tmp_path: Path) -> str:
    """Run the first python block after ``heading`` in a process of its own; its output."""
    start = README.index(heading)
    (code,) = re.findall(r"```python\n(.*?)```", README[start:], re.S)[:1]
    script = tmp_path / "readme_block.py"
    script.write_text(code)
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_framework_example_runs_and_prints_what_it_read(tmp_path: Path) -> None:
    out = run_first_block_after("### Keys, scoped state, time and retries", tmp_path)
    assert out.split() == ["3", "0", "Porto"]


def test_the_branches_example_runs_and_prints_what_it_read(tmp_path: Path) -> None:
    out = run_first_block_after("### Branches, turns and usage per turn", tmp_path)
    assert out.splitlines() == ["['main', 'try-again']", "[2]", "6 None"]
