"""LangGraph's own graph-level tests over agentledger's savers.

The tests of the installed langgraph release's source distribution (fetched from the
package index once, kept in ``.cache/``) that take LangGraph's ``sync_checkpointer`` or
``async_checkpointer`` fixture run real graphs over a saver: test_pregel(_async),
test_time_travel(_async), test_subgraph_persistence(_async), test_large_cases(_async),
test_interruption, test_delta_channel_* and the rest. They run in pytests of their
own (``SHARDS`` at once) with those fixtures replaced (``suite/savers.py``):
LangGraph's ``SqliteSaver`` as the reference, and agentledger's ``LedgerSaver`` and
``AsyncLedgerSaver`` on SQLite,
PostgreSQL and, where its server is set, MariaDB/MySQL. Every test that passes on
the reference must pass on each of ours. The tests that failed are run again, on their
own, up to RERUNS times before they count: a few of LangGraph's stream tests time their
events to within 0.2 s, which a host busy with the other lanes misses now and then (one
run on a loaded host missed it twice, a later one four times).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ...framework_suites import (
    NOT_RUN,
    Outcome,
    migrated_servers,
    outcomes,
    release_sources,
    suite_databases,
    with_conftest,
)

pytestmark = [pytest.mark.slow, pytest.mark.suite]

RERUNS = 5
"""How often the failed tests run again, on their own, before a failure counts (a CI
run of 43 minutes on a loaded host saw test_stream_buffering_single_node miss its 0.2 s
four times running)."""

SAVERS = Path(__file__).with_name("suite") / "savers.py"
SAVER_FIXTURES = ("sync_checkpointer", "async_checkpointer")
REFERENCES = {"sqlitesaver": "agentledger_{}", "asyncsqlitesaver": "agentledger_{}_aio"}
"""The reference's ids in ``suite/savers.py``, and the id of agentledger's saver of a
database that runs the same test."""

CANNOT_PASS: dict[str, str] = {}
"""Tests that pass on ``SqliteSaver`` but cannot on agentledger's, by name without the
saver's id, with the reason (one of LangGraph's internals agentledger cannot meet)."""


def saver_test_files(tests: Path) -> list[str]:
    """The test files that take a saver fixture."""
    return sorted(
        str(path.relative_to(tests.parent))
        for path in tests.glob("test_*.py")
        if any(fixture in path.read_text() for fixture in SAVER_FIXTURES)
    )


def counterpart(test_id: str, database: str) -> tuple[str, str] | None:
    """The id of the run of a reference test on agentledger's saver of ``database``, and
    the test's name without the saver; None for a test not run on the reference."""
    name, _, ids = test_id.partition("[")
    parts = ids.rstrip("]").split("-")
    for index, part in enumerate(parts):
        if part in REFERENCES:
            ours = [*parts[:index], REFERENCES[part].format(database), *parts[index + 1 :]]
            rest = [*parts[:index], *parts[index + 1 :]]
            return f"{name}[{'-'.join(ours)}]", f"{name}[{'-'.join(rest)}]"
    return None


SHARDS = 2
"""The saver test files run in this many pytests at once, each on the databases of
all: run alone, the files took 17 minutes of one core, most of the slow lane, and the
machine's second core sat idle once the other lanes were done."""


def shards_of(root: Path, files: list[str], count: int = SHARDS) -> list[list[str]]:
    """``files`` (relative to ``root``) dealt into ``count`` shards of about equal size
    (in bytes of test code, which tracks their running time), the biggest first."""
    shards: list[list[str]] = [[] for _ in range(count)]
    sizes = [0] * count
    for file in sorted(files, key=lambda name: -(root / name).stat().st_size):
        smallest = sizes.index(min(sizes))
        shards[smallest].append(file)
        sizes[smallest] += (root / file).stat().st_size
    return [shard for shard in shards if shard]


class _Shard:
    """One pytest of LangGraph's suite over some of its files, with a cache (for
    ``--last-failed``) and reports of its own."""

    def __init__(self, files: list[str], folder: Path, suite: Path, env: dict[str, str]) -> None:
        self.files, self.folder, self.suite, self.env = files, folder, suite, env
        folder.mkdir()
        self.process: subprocess.Popen[str] | None = None

    def _pytest(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly",
                "-o", f"cache_dir={self.folder / 'cache'}", *args]  # fmt: skip

    def start(self) -> None:
        junit = self.folder / "junit.xml"
        self.process = subprocess.Popen(
            self._pytest(*self.files, f"--junitxml={junit}"),
            cwd=self.suite, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            text=True,
        )  # fmt: skip

    def stop(self) -> None:
        """End its pytest if it still runs (another shard failed first)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def finish(self) -> dict[str, Outcome]:
        """Its outcomes, once it ends, with its failures run again."""
        assert self.process is not None
        self.process.wait(timeout=1800)
        found = outcomes(self.folder / "junit.xml")
        for rerun in range(RERUNS):
            if not any(not o.passed and "failure" in o.detail for o in found.values()):
                break
            # Again, on their own: LangGraph's stream tests time their events to within
            # 0.2 s, which a host busy with the other lanes can miss. A failure that
            # repeats on its own every time counts.
            again = self.folder / f"junit-again-{rerun}.xml"
            subprocess.run(
                self._pytest("--last-failed", f"--junitxml={again}"),
                cwd=self.suite, env=self.env, capture_output=True, text=True, timeout=600,
                check=False,
            )  # fmt: skip
            found.update(outcomes(again))
        return found


def test_every_graph_test_that_passes_on_sqlite_saver_passes_on_agentledger(
    tmp_path: Path,
) -> None:
    suite = with_conftest(
        release_sources("langgraph"),
        tmp_path / "langgraph",
        SAVERS,
        (*SAVER_FIXTURES, "pytest_collection_modifyitems"),
    )
    databases = suite_databases()
    env = {**os.environ, "NO_DOCKER": "true", "AGENTLEDGER_SUITE_DATABASES": ",".join(databases)}
    with migrated_servers(databases, tmp_path) as urls:
        env.update(urls)
        shards = [
            _Shard(files, tmp_path / f"shard-{index}", suite, env)
            for index, files in enumerate(shards_of(suite, saver_test_files(suite / "tests")))
        ]
        found: dict[str, Outcome] = {}
        try:
            for shard in shards:
                shard.start()
            for shard in shards:
                found.update(shard.finish())
        finally:
            for shard in shards:
                shard.stop()

    failures, stale, compared = [], [], 0
    for test_id, reference in found.items():
        for database in databases:
            pair = counterpart(test_id, database)
            if pair is None or not reference.passed:
                continue
            ours_id, name = pair
            ours = found.get(ours_id, NOT_RUN)
            compared += 1
            if name in CANNOT_PASS:
                stale.extend([] if not ours.passed else [f"{ours_id} passes now"])
            elif not ours.passed:
                failures.append(f"{ours_id}: {ours.detail}")
    assert compared > 1000, f"only {compared} tests compared: {sorted(found)[:20]}"
    assert not failures, f"{len(failures)} of {compared} failed:\n" + "\n".join(failures)
    assert not stale, "CANNOT_PASS lists tests that pass:\n" + "\n".join(stale)
