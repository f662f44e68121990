"""The async proxies in the source are what tools/generate_async.py writes today."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_generated_async_proxies_are_fresh() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "generate_async.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
