"""LangGraph's own graph-level tests over agentledger's savers.

The tests of the installed langgraph release's source distribution (fetched from the
package index once, kept in ``.cache/``) that take LangGraph's ``sync_checkpointer`` or
``async_checkpointer`` fixture run real graphs over a saver: test_pregel(_async),
test_time_travel(_async), test_subgraph_persistence(_async), test_large_cases(_async),
test_interruption, test_delta_channel_* and the rest. They run in a pytest of their
own with those fixtures replaced (``suite/savers.py``): LangGraph's ``SqliteSaver`` as
the reference, and agentledger's ``LedgerSaver`` and ``AsyncLedgerSaver`` on SQLite,
PostgreSQL and, where its server is set, MariaDB/MySQL. Every test that passes on
the reference must pass on each of ours.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from contextlib import ExitStack
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from xml.etree import ElementTree

import pytest

from agentledger import migrations

from ...databases import IN_CI, scratch_database, server_url

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
CACHE = ROOT / ".cache"
SAVERS = Path(__file__).with_name("suite") / "savers.py"
SAVER_FIXTURES = ("sync_checkpointer", "async_checkpointer")
DATABASES = ("sqlite", "postgresql")
"""Always run; MariaDB/MySQL too where its server is set (always under CI)."""
REFERENCES = {"sqlitesaver": "agentledger_{}", "asyncsqlitesaver": "agentledger_{}_aio"}
"""The reference's ids in ``suite/savers.py``, and the id of agentledger's saver of a
database that runs the same test."""

CANNOT_PASS: dict[str, str] = {}
"""Tests that pass on ``SqliteSaver`` but cannot on agentledger's, by name without the
saver's id, with the reason (one of LangGraph's internals agentledger cannot meet)."""


def _unavailable(message: str) -> None:
    if IN_CI:
        pytest.fail(f"CI=true, but {message}", pytrace=False)
    pytest.skip(message)


def langgraph_tests() -> Path:
    """The source distribution of the installed langgraph, unpacked in ``.cache/``."""
    release = f"langgraph-{version('langgraph')}"
    unpacked = CACHE / release
    if (unpacked / "tests" / "conftest.py").exists():
        return unpacked
    CACHE.mkdir(exist_ok=True)
    fetched = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary",
         ":all:", f"langgraph=={version('langgraph')}", "--dest", str(CACHE)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    archive = CACHE / f"{release}.tar.gz"
    if fetched.returncode != 0 or not archive.exists():
        _unavailable(f"the source distribution of {release} could not be fetched: {fetched.stderr}")
    with tarfile.open(archive) as tar:
        tar.extractall(CACHE, filter="data")
    return unpacked


def with_our_savers(source: Path, into: Path) -> Path:
    """A copy of the release's tests whose saver fixtures are ``suite/savers.py``'s."""
    shutil.copytree(source, into)
    tests = into / "tests"
    shutil.copy(SAVERS, tests / "conftest_agentledger.py")
    with (tests / "conftest.py").open("a") as conftest:
        conftest.write(
            "\n\n# agentledger: its savers replace LangGraph's in these fixtures.\n"
            "from tests.conftest_agentledger import (  # noqa: E402, F401\n"
            "    async_checkpointer,\n"
            "    pytest_collection_modifyitems,\n"
            "    sync_checkpointer,\n"
            ")\n"
        )
    return into


def saver_test_files(tests: Path) -> list[str]:
    """The test files that take a saver fixture."""
    return sorted(
        str(path.relative_to(tests.parent))
        for path in tests.glob("test_*.py")
        if any(fixture in path.read_text() for fixture in SAVER_FIXTURES)
    )


@dataclass(frozen=True)
class Outcome:
    passed: bool
    detail: str


def outcomes(junit: Path) -> dict[str, Outcome]:
    """Each test's outcome in a JUnit report, by ``module::name[ids]``."""
    found = {}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        problems = [case.find(tag) for tag in ("failure", "error", "skipped")]
        problem = next((found for found in problems if found is not None), None)
        detail = "" if problem is None else f"{problem.tag}: {problem.get('message', '')[:300]}"
        found[f"{case.get('classname')}::{case.get('name')}"] = Outcome(problem is None, detail)
    return found


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


def test_every_graph_test_that_passes_on_sqlite_saver_passes_on_agentledger(
    tmp_path: Path,
) -> None:
    suite = with_our_savers(langgraph_tests(), tmp_path / "langgraph")
    databases = DATABASES if server_url("mysql") is None else (*DATABASES, "mysql")
    env = {**os.environ, "NO_DOCKER": "true", "AGENTLEDGER_SUITE_DATABASES": ",".join(databases)}
    with ExitStack() as servers:
        for database in databases[1:]:
            url = servers.enter_context(scratch_database(database, str(tmp_path)))
            migrations.upgrade(url)
            env[f"AGENTLEDGER_SUITE_{database.upper()}_URL"] = url.render_as_string(
                hide_password=False
            )
        junit = tmp_path / "junit.xml"
        subprocess.run(
            [sys.executable, "-m", "pytest", *saver_test_files(suite / "tests"), "-q",
             "-p", "no:cacheprovider", "-p", "no:randomly", f"--junitxml={junit}"],
            cwd=suite, env=env, capture_output=True, text=True, timeout=1800, check=False,
        )  # fmt: skip
    found = outcomes(junit)

    failures, stale, compared = [], [], 0
    for test_id, reference in found.items():
        for database in databases:
            pair = counterpart(test_id, database)
            if pair is None or not reference.passed:
                continue
            ours_id, name = pair
            ours = found.get(ours_id, Outcome(False, "not run"))
            compared += 1
            if name in CANNOT_PASS:
                stale.extend([] if not ours.passed else [f"{ours_id} passes now"])
            elif not ours.passed:
                failures.append(f"{ours_id}: {ours.detail}")
    assert compared > 1000, f"only {compared} tests compared: {sorted(found)[:20]}"
    assert not failures, f"{len(failures)} of {compared} failed:\n" + "\n".join(failures)
    assert not stale, "CANNOT_PASS lists tests that pass:\n" + "\n".join(stale)
