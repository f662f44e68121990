"""The test run's skip summary: one line per reason, in plain words, each driver's
install hint its own."""

from __future__ import annotations

import pytest

from ..backends import BACKENDS
from ..conftest import skip_summary


def _skipped(nodeid: str, reason: str) -> pytest.TestReport:
    return pytest.TestReport(
        nodeid, ("x.py", 1, nodeid), {}, "skipped", ("x.py", 1, f"Skipped: {reason}"), "call"
    )


def test_each_reason_is_one_line_with_its_count_the_most_common_first() -> None:
    reports = [
        _skipped("a[1]", "SQLite has no statement timeout"),
        _skipped("b[1]", "mysql tests need a server"),
        _skipped("b[2]", "mysql tests need a server"),
    ]
    assert skip_summary(reports) == [
        "SKIPPED [2 tests] mysql tests need a server",
        "SKIPPED [1 test] SQLite has no statement timeout",
    ]


def test_a_missing_hook_skipped_on_several_targets_is_one_line() -> None:
    reason = "the harness has no `reopen` hook (a second ledger); give Harness one"
    reports = [
        _skipped("t[sqlite-memory-sync]", f"sqlite-memory-sync: {reason}"),
        _skipped("t[sqlite-memory-async]", f"sqlite-memory-async: {reason}"),
        _skipped("t[async]", f"public-only-async: {reason}"),
    ]
    assert skip_summary(reports) == [f"SKIPPED [3 tests] {reason}"]


def test_a_reason_with_a_colon_of_its_own_is_kept_whole() -> None:
    reason = "mysql tests need a server: set AGENTLEDGER_TEST_MYSQL_URL"
    assert skip_summary([_skipped("t", reason)]) == [f"SKIPPED [1 test] {reason}"]


def test_a_missing_driver_says_to_run_dev_py_setup_drivers() -> None:
    drivers = [backend for backend in BACKENDS if backend.package is not None]
    assert drivers
    for backend in drivers:
        assert f"the {backend.package} driver is not installed: python3 dev.py setup drivers" in (
            backend.missing()
        )
        assert "pip install" not in backend.missing()


def test_only_mysqlclient_s_line_names_libmariadb() -> None:
    named = {
        backend.package
        for backend in BACKENDS
        if backend.package is not None and "libmariadb" in backend.missing()
    }
    assert named == {"mysqlclient"}
