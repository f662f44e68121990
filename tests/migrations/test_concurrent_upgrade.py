"""Four processes upgrading one fresh database at once all succeed (research B5, T13)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from sqlalchemy import create_engine, func, select, table
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger import migrations
from agentledger.models import VERSION_TABLE

from ._support import OUR_TABLES, drift, our_table_names

PROCESSES = 4

# Each child imports first, says "ready", then waits for "go": the upgrades start
# together instead of being spread over the interpreters' start-up times.
CHILD = """
import sys
from agentledger import migrations
url = sys.argv[1]
print("ready", flush=True)
sys.stdin.readline()
migrations.upgrade(url)
print(migrations.current(url), flush=True)
"""


def _version_rows(url: URL) -> int:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            count = select(func.count()).select_from(table(VERSION_TABLE))
            return int(connection.execute(count).scalar_one())
    finally:
        engine.dispose()


@pytest.mark.slow
def test_four_processes_upgrading_one_fresh_database_all_succeed(scratch_url: URL) -> None:
    target = scratch_url.render_as_string(hide_password=False)
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, target],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        results = [child.communicate(timeout=120) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()

    failures = [err for child, (_, err) in zip(children, results, strict=True) if child.returncode]
    assert failures == []
    assert [out.strip() for out, _ in results] == [migrations.head()] * PROCESSES
    assert our_table_names(scratch_url) == OUR_TABLES | {VERSION_TABLE}
    assert _version_rows(scratch_url) == 1
    assert drift(scratch_url) == []
