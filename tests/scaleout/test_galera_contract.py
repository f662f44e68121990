"""The contract suite's MariaDB runs (tests/contract ``-m mysql``: the MariaDB targets
of the dialect and driver tiers, both drivers and both APIs) pass on a Galera cluster
written on every node: through the relay, which hands each new connection to the next
node, as HAProxy or MaxScale would spread an application's connections.

A ledger's pool reuses its last connection, so a test's sequential calls mostly stay
on one node; its concurrent writers open more connections and land on different
nodes, where certification at COMMIT decides between them. The suite runs in a pytest
of its own (about 70 s on two cores), on a fresh database of the cluster."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import NullPool

from ..backends import MYSQL_ENV
from .galera import Galera

pytestmark = [pytest.mark.slow, pytest.mark.mysql]

ROOT = Path(__file__).resolve().parents[2]
SELECTION = ("tests/contract", "-m", "mysql")
PYTEST_OPTIONS = ("-q", "-p", "no:cacheprovider", "--tb=native")
"""``--tb=native``: a run that draws pytest's own tracebacks can end in CPython 3.11.7's
"AST constructor recursion depth mismatch" (see tests/integrations/openai_agents)."""
TIMEOUT_S = 600
LEAST_PASSED = 200
"""The selection holds about 245 tests: fewer passed means most did not run."""
LEAST_CONNECTIONS = 20
"""Each node must have served at least this many of the run's connections."""


def connections(node_urls: list[URL]) -> list[int]:
    """Each node's count of connections since it started (``Connections``)."""
    counts = []
    for url in node_urls:
        engine = create_engine(url, poolclass=NullPool)
        try:
            with engine.connect() as connection:
                row = connection.execute(text("SHOW GLOBAL STATUS LIKE 'Connections'")).one()
                counts.append(int(row[1]))
        finally:
            engine.dispose()
    return counts


def run_contract_suite(url: URL, log: Path) -> tuple[int, str]:
    """Run the selection against ``url`` in a pytest of its own; its exit code and the
    tail of its output (the run is killed after TIMEOUT_S)."""
    env = {**os.environ, MYSQL_ENV: url.render_as_string(hide_password=False)}
    with log.open("w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "pytest", *SELECTION, *PYTEST_OPTIONS],
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        try:
            code = process.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            code = -1
    tail = log.read_text(errors="replace")[-6000:]
    if code == -1:
        tail += f"\n(killed after {TIMEOUT_S} s)"
    return code, tail


def test_the_mariadb_contract_suite_passes_through_a_relay_over_every_node(
    cluster: Galera, node_urls: list[URL], tmp_path: Path
) -> None:
    relay = make_url(cluster.relay_url).set(database=node_urls[0].database)
    before = connections(node_urls)
    code, tail = run_contract_suite(relay, tmp_path / "contract.log")
    served = [after - was for after, was in zip(connections(node_urls), before, strict=True)]
    print(f"connections per node during the run: {served}", tail.splitlines()[-1], sep="\n")
    assert code == 0, f"the contract suite failed through the relay:\n{tail}"
    passed = re.search(r"(\d+) passed", tail)
    assert passed is not None and int(passed[1]) >= LEAST_PASSED, tail
    assert min(served) >= LEAST_CONNECTIONS, f"the relay did not spread the run: {served}"
