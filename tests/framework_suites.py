"""What the slow tests that run a framework's own test files over agentledger share.

The installed release's source distribution (fetched from the package index once,
unpacked in ``.cache/``), the migrated scratch databases the copied tests get by
environment variable, and the outcome of each test in a JUnit report. Used by the
LangGraph suite (tests/integrations/langgraph/test_langgraph_suite.py) and the OpenAI
Agents SDK suite (tests/integrations/openai_agents/test_sdk_suite.py).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import NoReturn
from xml.etree import ElementTree

import pytest

from agentledger import migrations

from .databases import IN_CI, scratch_database, server_url

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache"
DATABASES = ("sqlite", "postgresql")
"""Always run; MariaDB/MySQL too where its server is set (always under CI)."""


def unavailable(message: str) -> NoReturn:
    """Skip the test, or under CI=true fail it: CI must run every suite."""
    if IN_CI:
        pytest.fail(f"CI=true, but {message}", pytrace=False)
    pytest.skip(message)


def suite_databases() -> tuple[str, ...]:
    """The databases a suite runs on: SQLite, PostgreSQL, and MariaDB where it is set."""
    return DATABASES if server_url("mysql") is None else (*DATABASES, "mysql")


def release_sources(distribution: str, marker: str = "tests/conftest.py") -> Path:
    """The source distribution of the installed ``distribution``, unpacked in
    ``.cache/`` (fetched with pip the first time); ``marker`` is a file it must hold."""
    pinned = version(distribution)
    names = {distribution, distribution.replace("-", "_")}
    for name in names:
        if (CACHE / f"{name}-{pinned}" / marker).exists():
            return CACHE / f"{name}-{pinned}"
    CACHE.mkdir(exist_ok=True)
    fetched = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary",
         ":all:", f"{distribution}=={pinned}", "--dest", str(CACHE)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    archives = [CACHE / f"{name}-{pinned}.tar.gz" for name in names]
    archive = next((found for found in archives if found.exists()), None)
    if fetched.returncode != 0 or archive is None:
        unavailable(
            f"the source distribution of {distribution} {pinned} could not be fetched: "
            f"{fetched.stderr}"
        )
    with tarfile.open(archive) as tar:
        tar.extractall(CACHE, filter="data")
    unpacked = CACHE / archive.name.removesuffix(".tar.gz")
    if not (unpacked / marker).exists():
        unavailable(f"{archive.name} holds no {marker}")
    return unpacked


def with_conftest(source: Path, into: Path, conftest: Path, names: tuple[str, ...]) -> Path:
    """A copy of the release ``source`` whose ``tests/conftest.py`` ends by importing
    ``names`` (fixtures, hooks) from ``conftest``, copied in as
    ``tests/conftest_agentledger.py``: they replace the release's own."""
    shutil.copytree(source, into)
    tests = into / "tests"
    shutil.copy(conftest, tests / "conftest_agentledger.py")
    imported = "".join(f"    {name},\n" for name in sorted(names))
    with (tests / "conftest.py").open("a") as appended:
        appended.write(
            "\n\n# agentledger: its stores in place of the framework's.\n"
            f"from tests.conftest_agentledger import (  # noqa: E402, F401\n{imported})\n"
        )
    return into


@contextmanager
def migrated_servers(databases: tuple[str, ...], tmp_path: Path) -> Iterator[dict[str, str]]:
    """A migrated scratch database of each of ``databases`` (SQLite: a file in
    ``tmp_path``), dropped afterwards: ``AGENTLEDGER_SUITE_<DATABASE>_URL`` for each,
    with the sync driver of tests/databases.py."""
    env = {}
    with ExitStack() as servers:
        for database in databases:
            url = servers.enter_context(scratch_database(database, str(tmp_path)))
            migrations.upgrade(url)
            env[f"AGENTLEDGER_SUITE_{database.upper()}_URL"] = url.render_as_string(
                hide_password=False
            )
        yield env


@dataclass(frozen=True)
class Outcome:
    passed: bool
    detail: str


NOT_RUN = Outcome(False, "not run")


def outcomes(junit: Path) -> dict[str, Outcome]:
    """Each test's outcome in a JUnit report, by ``module::name[ids]`` (none when the
    run wrote no report)."""
    found: dict[str, Outcome] = {}
    if not junit.exists():
        return found
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        problems = [case.find(tag) for tag in ("failure", "error", "skipped")]
        problem = next((found for found in problems if found is not None), None)
        detail = "" if problem is None else f"{problem.tag}: {problem.get('message', '')[:300]}"
        found[f"{case.get('classname')}::{case.get('name')}"] = Outcome(problem is None, detail)
    return found
