"""Crash consistency: a writer killed with SIGKILL at random moments never leaves a
half-written unit of work, and every acknowledged one survives (T7, T7b)."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import NullPool

from agentledger import Ledger, migrations

from ..databases import scratch_database
from . import summary

ROOT = Path(__file__).resolve().parents[2]
SQLITE_KILLS = 50
SERVER_KILLS = 12

pytestmark = pytest.mark.slow


def run_and_kill(url: str, journal_mode: str | None, rng: random.Random) -> list[str]:
    """Start the writer, let it work a random while, SIGKILL it; return its acknowledged ids."""
    command = [sys.executable, "-m", "tests.reliability._crash_writer", url]
    if journal_mode:
        command.append(journal_mode)
    writer = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert writer.stdout is not None
    ready = writer.stdout.readline()
    assert ready.strip() == "ready", writer.stderr.read() if writer.stderr else ""
    time.sleep(rng.uniform(0.02, 0.4))
    os.kill(writer.pid, signal.SIGKILL)
    out, _ = writer.communicate(timeout=30)
    assert writer.returncode == -signal.SIGKILL
    return [line for line in out.splitlines() if line.startswith("crash-")]


INVARIANTS = """
SELECT s.id, s.state, s.message_count, s.step_count,
       (SELECT count(*) FROM agentledger_messages m WHERE m.session_id = s.id) AS messages,
       (SELECT count(*) FROM agentledger_steps t WHERE t.session_id = s.id) AS steps
FROM agentledger_sessions s
"""
ORPHANS = """
SELECT (SELECT count(*) FROM agentledger_messages m
        WHERE NOT EXISTS (SELECT 1 FROM agentledger_sessions s WHERE s.id = m.session_id))
     + (SELECT count(*) FROM agentledger_steps t
        WHERE NOT EXISTS (SELECT 1 FROM agentledger_sessions s WHERE s.id = t.session_id))
"""


def check_whole(url: URL, acknowledged: set[str]) -> int:
    """Every stored session is whole, none is orphaned, every acknowledged one is there."""
    import json

    engine = create_engine(url, poolclass=NullPool)
    with engine.connect() as connection:
        rows = connection.execute(text(INVARIANTS)).all()
        orphans = connection.execute(text(ORPHANS)).scalar()
    engine.dispose()
    stored = set()
    for row in rows:
        state = row.state if isinstance(row.state, dict) else json.loads(row.state)
        declared = state["declared"]
        assert state.get("done") is True, f"{row.id}: a unit of work committed half-way"
        assert row.messages == row.message_count == declared, row
        assert row.steps == row.step_count == declared, row
        stored.add(row.id)
    assert orphans == 0
    assert acknowledged <= stored, f"acknowledged but lost: {sorted(acknowledged - stored)[:5]}"
    return len(stored)


@pytest.mark.sqlite
@pytest.mark.parametrize("journal_mode", [None, "DELETE"], ids=["wal", "rollback-journal"])
def test_sqlite_survives_sigkill_at_random_moments(
    tmp_path: Path, journal_mode: str | None
) -> None:
    url = f"sqlite:///{tmp_path}/crash.db"
    migrations.upgrade(url)
    rng = random.Random(7)
    acknowledged: set[str] = set()
    for _ in range(SQLITE_KILLS):
        acknowledged.update(run_and_kill(url, journal_mode, rng))
        database = sqlite3.connect(tmp_path / "crash.db")
        assert database.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        database.close()
        check_whole(make_url(url), acknowledged)
    with Ledger(url) as ledger:  # and the database still accepts writes
        ledger.sessions.create("after-the-crashes")
    summary.add(
        "sqlite kill -9 (" + (journal_mode or "WAL").lower() + ")",
        kills=SQLITE_KILLS,
        acknowledged=len(acknowledged),
    )


@pytest.mark.parametrize(
    "dialect",
    [
        pytest.param("postgresql", marks=pytest.mark.postgresql),
        pytest.param("mysql", marks=pytest.mark.mysql),
    ],
)
def test_a_killed_client_never_leaves_half_a_unit_of_work(tmp_path: Path, dialect: str) -> None:
    with scratch_database(dialect, str(tmp_path)) as url:
        migrations.upgrade(url)
        plain = url.set(drivername=url.get_backend_name()).render_as_string(hide_password=False)
        rng = random.Random(11)
        acknowledged: set[str] = set()
        for _ in range(SERVER_KILLS):
            acknowledged.update(run_and_kill(plain, None, rng))
            time.sleep(0.05)  # the server notices the dropped client and rolls it back
            check_whole(url, acknowledged)
        with Ledger(url) as ledger:
            ledger.sessions.create("after-the-crashes")
        summary.add(f"{dialect} client kill -9", kills=SERVER_KILLS, acknowledged=len(acknowledged))
