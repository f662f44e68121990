"""Writers in separate processes share a SQLite file without losing an update."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentledger import Ledger, migrations

WRITERS = 8
ROUNDS = 50
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.sqlite
@pytest.mark.slow
def test_processes_doing_read_modify_save_lose_no_update(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/shared.db"
    migrations.upgrade(url)
    with Ledger(url) as ledger:
        ledger.sessions.create("counter", state={"total": 0})
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.contract._writer",
                url,
                "counter",
                str(index),
                str(ROUNDS),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(WRITERS)
    ]
    conflicts = 0
    for worker in workers:
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err
        conflicts += int(out.strip())
    with Ledger(url) as ledger:
        final = ledger.sessions.get("counter")
    assert final.state["total"] == WRITERS * ROUNDS
    assert all(final.state[f"w{index}"] == ROUNDS for index in range(WRITERS))
    assert final.revision == 1 + WRITERS * ROUNDS
    assert conflicts > 0, "no contention was produced; the test proved nothing"
