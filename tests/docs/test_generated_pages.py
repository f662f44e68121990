"""The pages tools/generate_docs.py writes from the code (the command line reference,
from the CLI's own parser) are what it writes today: a flag added, renamed or removed
without running it fails here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_generated_pages_are_fresh() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "generate_docs.py"), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr + "run: python3 tools/generate_docs.py"


def test_the_cli_reference_names_every_command() -> None:
    page = (ROOT / "docs" / "cli-reference.md").read_text()
    for command in ("db upgrade", "db history", "sessions list", "export", "copy", "purge", "ui"):
        assert f"## `agentledger {command}`" in page, command
