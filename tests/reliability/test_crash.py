"""Crash consistency: a writer killed with SIGKILL at random moments never leaves a
half-written unit of work, and every acknowledged one survives (T7, T7b)."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import NullPool

from agentledger import Ledger, migrations

from ..databases import migrated_database
from . import summary

ROOT = Path(__file__).resolve().parents[2]
SQLITE_KILLS = 50
SERVER_KILLS = 12

pytestmark = pytest.mark.slow


class Writers:
    """The fork server of ``_crash_writer`` (``--serve``): starts and reaps writers."""

    def __init__(self) -> None:
        command = [sys.executable, "-m", "tests.reliability._crash_writer", "--serve"]
        self.process = subprocess.Popen(
            command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self._answer() == "serving"

    def _answer(self) -> str:
        assert self.process.stdout is not None
        answer = self.process.stdout.readline().strip()
        assert answer, f"the fork server stopped (exit {self.process.poll()})"
        return answer

    def _ask(self, line: str) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return self._answer()

    def start(self, url: str, journal_mode: str | None, out: Path) -> int:
        request = {"url": url, "journal_mode": journal_mode, "out": str(out)}
        return int(self._ask("run " + json.dumps(request)))

    def reap(self, pid: int) -> str:
        return self._ask(f"reap {pid}")

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def writers() -> Iterator[Writers]:
    server = Writers()
    try:
        yield server
    finally:
        server.close()


def run_and_kill(
    writers: Writers, url: str, journal_mode: str | None, rng: random.Random, out: Path
) -> list[str]:
    """Start a writer, let it work a random while, SIGKILL it; its acknowledged ids."""
    pid = writers.start(url, journal_mode, out)
    deadline = time.monotonic() + 30
    while not out.exists() or not out.read_text().startswith("ready\n"):
        assert time.monotonic() < deadline, "the writer never got ready (see its stderr)"
        time.sleep(0.005)
    time.sleep(rng.uniform(0.02, 0.4))
    os.kill(pid, signal.SIGKILL)
    assert writers.reap(pid) == "killed"
    return [line for line in out.read_text().splitlines() if line.startswith("crash-")]


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
    tmp_path: Path, journal_mode: str | None, writers: Writers
) -> None:
    url = f"sqlite:///{tmp_path}/crash.db"
    migrations.upgrade(url)
    rng = random.Random(7)
    acknowledged: set[str] = set()
    for _ in range(SQLITE_KILLS):
        acknowledged.update(run_and_kill(writers, url, journal_mode, rng, tmp_path / "out"))
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
def test_a_killed_client_never_leaves_half_a_unit_of_work(
    tmp_path: Path, dialect: str, writers: Writers
) -> None:
    with migrated_database(dialect, tmp_path) as url:
        plain = url.set(drivername=url.get_backend_name()).render_as_string(hide_password=False)
        rng = random.Random(11)
        acknowledged: set[str] = set()
        for _ in range(SERVER_KILLS):
            acknowledged.update(run_and_kill(writers, plain, None, rng, tmp_path / "out"))
            time.sleep(0.05)  # the server notices the dropped client and rolls it back
            check_whole(url, acknowledged)
        with Ledger(url) as ledger:
            ledger.sessions.create("after-the-crashes")
        summary.add(f"{dialect} client kill -9", kills=SERVER_KILLS, acknowledged=len(acknowledged))
