"""The store benchmark (benchmarks/langgraph_store.py) runs end to end on a few items,
so it cannot rot; no time is judged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.langgraph_store import OPERATIONS

from ...databases import bench_url

ROOT = Path(__file__).resolve().parents[3]


def test_the_store_benchmark_times_every_operation_of_both_stores_on_every_database(
    tmp_path: Path,
) -> None:
    out = tmp_path / "langgraph_store.json"
    command = [sys.executable, "-m", "benchmarks.langgraph_store", "--items", "120"]
    url = bench_url("postgresql", "_bench_store")
    command += ["--no-postgres"] if url is None else ["--postgres-url", url]
    done = subprocess.run(
        [*command, "--rounds", "1", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(out.read_text())
    databases = ["sqlite"] if url is None else ["sqlite", "postgresql"]
    rows = {(row["database"], row["store"]): row for row in report["results"]}
    assert set(rows) == {(d, store) for d in databases for store in ("agentledger", "langgraph")}
    assert all(row[op] > 0 for row in rows.values() for op in (*OPERATIONS, "fill"))
    by_meaning = {(row["database"], row["store"]) for row in report["by_meaning"]}
    assert by_meaning == {
        *((database, "agentledger") for database in databases),
        ("memory", "langgraph InMemoryStore"),
    }
    assert "| sqlite | ratio |" in done.stdout
    assert "search by meaning, 10 closest" in done.stdout
