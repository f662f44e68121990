"""examples/show_tables.py (the demo's fallback) migrates and lists every table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy.engine import URL

from agentledger import migrations
from agentledger.engine import URL_ENV
from agentledger.models import VERSION_TABLE

from ._support import OUR_TABLES

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "show_tables.py"


def test_show_tables_migrates_the_database_and_prints_every_table(scratch_url: URL) -> None:
    env = {**os.environ, URL_ENV: scratch_url.render_as_string(hide_password=False)}
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=120
    )

    assert done.returncode == 0, done.stderr
    assert f"is at revision {migrations.head()}" in done.stdout
    printed = {line for line in done.stdout.splitlines() if line and not line.startswith(" ")}
    assert OUR_TABLES | {VERSION_TABLE} <= printed
