"""dev.py's test command: which pytests it runs side by side under CI, on which
databases, and how their outcomes make its own (CI runs it, but a wrong split would
still pass there: a test selected by none of the pytests is never run)."""

from __future__ import annotations

import importlib.util
import io
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from _pytest.mark.expression import Expression  # how pytest reads -m

ROOT = Path(__file__).resolve().parents[2]
POSTGRES = "postgresql://postgres@127.0.0.1:5432/agentledger_test"
MYSQL = "mysql://root@127.0.0.1:3306/agentledger_test?charset=utf8mb4"


@pytest.fixture
def dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("agentledger_dev_script", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Pytests:
    """What dev.test started: the pytest in front (``run``) and those beside it."""

    def __init__(self, dev: ModuleType, monkeypatch: pytest.MonkeyPatch, codes: list[int]):
        self.front: list[tuple[list[str], dict[str, str]]] = []
        self.beside: list[tuple[list[str], dict[str, str]]] = []
        self.codes = list(codes)  # the front's exit code, then each beside one's
        front_code = self.codes.pop(0)
        pytests = self

        def run(argv: list[str], env: dict[str, str] | None = None) -> int:
            pytests.front.append((argv, dict(env or {})))
            return front_code

        class Popen:
            def __init__(self, command: list[str], *, env: dict[str, str], **_: Any) -> None:
                pytests.beside.append((command[1:], env))
                self.code = pytests.codes.pop(0) if pytests.codes else 0

            def wait(self) -> int:
                return self.code

            def terminate(self) -> None:
                """Nothing runs."""

        monkeypatch.setattr(dev, "run", run)
        monkeypatch.setattr(dev.subprocess, "Popen", Popen)
        monkeypatch.setattr(sys, "stdout", io.StringIO())


def _ci(monkeypatch: pytest.MonkeyPatch, *, mysql: str | None, portable: str | None = None) -> None:
    monkeypatch.setenv("AGENTLEDGER_TEST_EMBEDDED_PASS", "-m postgresql")
    if portable is None:
        monkeypatch.delenv("AGENTLEDGER_TEST_PORTABLE_PASS", raising=False)
    else:
        monkeypatch.setenv("AGENTLEDGER_TEST_PORTABLE_PASS", portable)
    monkeypatch.setenv("AGENTLEDGER_TEST_POSTGRES_URL", POSTGRES)
    if mysql is None:
        monkeypatch.delenv("AGENTLEDGER_TEST_MYSQL_URL", raising=False)
    else:
        monkeypatch.setenv("AGENTLEDGER_TEST_MYSQL_URL", mysql)


def test_on_a_laptop_the_slow_tests_and_the_framework_suites_run_in_pytests_beside_the_rest(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTLEDGER_TEST_EMBEDDED_PASS", raising=False)
    monkeypatch.delenv("AGENTLEDGER_TEST_PORTABLE_PASS", raising=False)
    monkeypatch.delenv("AGENTLEDGER_TEST_POSTGRES_URL", raising=False)
    monkeypatch.delenv("AGENTLEDGER_TEST_MYSQL_URL", raising=False)
    pytests = _Pytests(dev, monkeypatch, [0, 0, 0])
    assert dev.test(["-k", "messages"]) == 0
    assert [argv for argv, _ in pytests.front] == [
        ["-m", "pytest", "-k", "messages", "-m", "not slow"]
    ]
    assert [argv for argv, _ in pytests.beside] == [
        ["-m", "pytest", "-k", "messages", "-m", "(slow) and (not suite)"],
        ["-m", "pytest", "-k", "messages", "-m", "(slow) and (suite)"],
    ]


def test_fast_runs_one_pytest_of_the_fast_tiers(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTLEDGER_TEST_EMBEDDED_PASS", raising=False)
    monkeypatch.delenv("AGENTLEDGER_TEST_PORTABLE_PASS", raising=False)
    pytests = _Pytests(dev, monkeypatch, [0])
    assert dev.test(["--fast", "tests/contract"]) == 0
    assert [argv for argv, _ in pytests.front] == [
        ["-m", "pytest", "tests/contract", "-m", "not driver and not slow"]
    ]
    assert pytests.beside == []


def test_a_marker_expression_given_is_joined_to_each_lanes(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTLEDGER_TEST_EMBEDDED_PASS", raising=False)
    monkeypatch.delenv("AGENTLEDGER_TEST_PORTABLE_PASS", raising=False)
    pytests = _Pytests(dev, monkeypatch, [0, 0, 0])
    assert dev.test(["-m", "sqlite"]) == 0
    assert [argv for argv, _ in pytests.front] == [
        ["-m", "pytest", "-m", "(sqlite) and (not slow)"]
    ]
    assert [argv for argv, _ in pytests.beside] == [
        ["-m", "pytest", "-m", "(sqlite) and (slow) and (not suite)"],
        ["-m", "pytest", "-m", "(sqlite) and (slow) and (suite)"],
    ]


def test_under_ci_the_slow_suite_mariadb_only_and_private_postgresql_pytests_run_beside(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ci(monkeypatch, mysql=MYSQL)
    pytests = _Pytests(dev, monkeypatch, [0, 0, 0, 0, 0])
    assert dev.test(["-q"]) == 0
    [(front, front_env)] = pytests.front
    assert front == ["-m", "pytest", "-q", "-m", "(not slow) and (not (mysql and not postgresql))"]
    assert front_env["AGENTLEDGER_TEST_MYSQL_URL"] == (
        "mysql://root@127.0.0.1:3306/agentledger_test_rest?charset=utf8mb4"
    )
    assert front_env["AGENTLEDGER_TEST_POSTGRES_URL"] == POSTGRES
    (slow, slow_env), (suite, suite_env), (private, private_env), (mariadb, mariadb_env) = (
        pytests.beside
    )
    not_mariadb_only = "(not (mysql and not postgresql))"
    assert slow == ["-m", "pytest", "-q", "-m", f"(slow) and (not suite) and {not_mariadb_only}"]
    assert slow_env["AGENTLEDGER_TEST_POSTGRES_URL"] == POSTGRES.replace("_test", "_test_slow")
    assert slow_env["AGENTLEDGER_TEST_MYSQL_URL"] == MYSQL.replace("_test?", "_test_slow?")
    assert suite == ["-m", "pytest", "-q", "-m", f"(slow) and (suite) and {not_mariadb_only}"]
    assert suite_env["AGENTLEDGER_TEST_POSTGRES_URL"] == POSTGRES.replace("_test", "_test_suite")
    assert suite_env["AGENTLEDGER_TEST_MYSQL_URL"] == MYSQL.replace("_test?", "_test_suite?")
    assert private == ["-m", "pytest", "-q", "-m", "postgresql"]
    assert private_env["AGENTLEDGER_TEST_POSTGRES_URL"] == "embedded"
    assert mariadb == ["-m", "pytest", "-q", "-m", "mysql and not postgresql"]
    assert mariadb_env["AGENTLEDGER_TEST_MYSQL_URL"] == MYSQL


def test_the_portable_pass_runs_its_tests_beside_with_the_portable_profile(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ci(monkeypatch, mysql=MYSQL, portable="tests/contract tests/drivers/x.py -m 'not slow'")
    pytests = _Pytests(dev, monkeypatch, [0, 0, 0, 0, 0, 0])
    assert dev.test(["-q"]) == 0
    portable, portable_env = pytests.beside[-1]
    assert portable == [
        "-m", "pytest", "tests/contract", "tests/drivers/x.py", "-q", "-m", "not slow",
    ]  # fmt: skip
    assert portable_env["AGENTLEDGER_PROFILE"] == "portable"
    assert portable_env["AGENTLEDGER_TEST_POSTGRES_URL"] == POSTGRES + "_portable"
    assert portable_env["AGENTLEDGER_TEST_MYSQL_URL"] == MYSQL.replace("_test?", "_test_portable?")


def test_without_the_portable_pass_no_run_has_the_portable_profile(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ci(monkeypatch, mysql=MYSQL)
    pytests = _Pytests(dev, monkeypatch, [0, 0, 0, 0, 0])
    assert dev.test([]) == 0
    every_env = [env for _, env in pytests.front + pytests.beside]
    assert len(every_env) == 5
    assert all("AGENTLEDGER_PROFILE" not in env for env in every_env)


def test_every_test_is_selected_by_exactly_one_lane_of_a_ci_run(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Beside the private PostgreSQL pass (a second run of the PostgreSQL tests), the
    # lanes must split the suite: a test selected by none would never run.
    _ci(monkeypatch, mysql=MYSQL)
    lanes = dev.plan(None, slow_lane=True, env=dict(os.environ))
    splitting = [lane for lane in lanes if "private PostgreSQL" not in lane.name]
    for marks in _every_combination(("slow", "suite", "mysql", "postgresql", "sqlite", "driver")):
        chosen = [lane.name for lane in splitting if _selects(lane.selection, marks)]
        assert len(chosen) == 1, (marks, chosen)


def _every_combination(names: tuple[str, ...]) -> list[set[str]]:
    return [
        {n for bit, n in enumerate(names) if mask >> bit & 1} for mask in range(2 ** len(names))
    ]


def _selects(expression: str | None, marks: set[str]) -> bool:
    """Whether a marker expression selects a test with ``marks``, as pytest reads it."""
    return expression is None or Expression.compile(expression).evaluate(
        lambda name, **_: name in marks
    )


def test_without_a_mariadb_server_the_private_postgresql_pass_runs_beside(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ci(monkeypatch, mysql=None)
    pytests = _Pytests(dev, monkeypatch, [0, 0, 0, 0])
    assert dev.test([]) == 0
    assert [argv for argv, _ in pytests.front] == [["-m", "pytest", "-m", "not slow"]]
    assert [argv for argv, _ in pytests.beside] == [
        ["-m", "pytest", "-m", "(slow) and (not suite)"],
        ["-m", "pytest", "-m", "(slow) and (suite)"],
        ["-m", "pytest", "-m", "postgresql"],
    ]


@pytest.mark.parametrize(
    ("codes", "expected"),
    [
        ([0, 0, 0, 0, 1], 1),
        ([0, 0, 0, 3, 0], 3),
        ([2, 0, 0, 1, 0], 2),
        ([0, 4, 0, 0, 0], 4),
        ([0, 0, 6, 0, 0], 6),
        ([0, 0, 0, 0, 0], 0),
    ],
    ids=[
        "mariadb-fails",
        "private-fails",
        "front-fails-first",
        "slow-fails",
        "suite-fails",
        "all-pass",
    ],
)
def test_the_runs_exit_code_is_the_first_failing_lanes(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch, codes: list[int], expected: int
) -> None:
    # codes: the front pytest's, the slow lane's, the suites', the private PostgreSQL
    # pass's, MariaDB's.
    _ci(monkeypatch, mysql=MYSQL)
    _Pytests(dev, monkeypatch, codes)
    assert dev.test([]) == expected


def test_a_lane_that_selects_no_test_does_not_fail_the_run(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `dev.py test tests/unit` under CI: no slow and no PostgreSQL test among those asked for.
    _ci(monkeypatch, mysql=None)
    nothing = dev.NO_TESTS_COLLECTED
    _Pytests(dev, monkeypatch, [0, nothing, nothing, nothing])
    assert dev.test(["tests/unit"]) == 0


def test_a_run_in_which_no_lane_selects_a_test_says_so(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ci(monkeypatch, mysql=None)
    nothing = dev.NO_TESTS_COLLECTED
    _Pytests(dev, monkeypatch, [nothing, nothing, nothing, nothing])
    assert dev.test(["-k", "no-such-test"]) == nothing


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "mysql://root@127.0.0.1:3306/agentledger_test",
            "mysql://root@127.0.0.1:3306/agentledger_test_rest",
        ),
        ("mysql://root@h/db/", "mysql://root@h/db_rest"),
        ("mysql://root@h/db?charset=utf8mb4", "mysql://root@h/db_rest?charset=utf8mb4"),
    ],
)
def test_a_database_suffix_goes_on_the_database_name_only(
    dev: ModuleType, url: str, expected: str
) -> None:
    assert dev._with_database_suffix(url, "_rest") == expected


class _Calls:
    """What dev.py's demo and ui commands set up and ran (nothing is installed or run)."""

    def __init__(self, dev: ModuleType, monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
        self.setups: list[tuple[str, Path]] = []
        self.runs: list[tuple[list[str], Path]] = []
        monkeypatch.setattr(dev, "ROOT", root)
        monkeypatch.setattr(dev, "DEMO_VENV", root / ".venv-demo")
        monkeypatch.setattr(
            dev, "setup", lambda extras, venv_dir: self.setups.append((extras, venv_dir))
        )

        def run(argv: list[str], env: Any = None, venv_dir: Path = dev.VENV) -> int:
            self.runs.append((argv, venv_dir))
            return 0

        monkeypatch.setattr(dev, "run", run)


def test_the_demo_runs_the_quickstart_in_a_venv_of_agentledger_alone(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls = _Calls(dev, monkeypatch, tmp_path)
    assert dev.main(["demo"]) == 0
    assert calls.setups == [("", tmp_path / ".venv-demo")]
    assert calls.runs == [(["examples/quickstart_async.py"], tmp_path / ".venv-demo")]


def test_the_viewer_command_adds_the_ui_extra_and_opens_the_demos_database(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "agentledger.db").touch()
    calls = _Calls(dev, monkeypatch, tmp_path)
    assert dev.main(["ui", "--port", "9000"]) == 0
    assert calls.setups == [("ui", tmp_path / ".venv-demo")]
    command = ["-m", "agentledger", "ui", "--url", "sqlite:///agentledger.db", "--port", "9000"]
    assert calls.runs == [(command, tmp_path / ".venv-demo")]


def test_the_viewer_command_runs_the_demo_first_when_it_has_no_database(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls = _Calls(dev, monkeypatch, tmp_path)
    assert dev.main(["ui"]) == 0
    assert [extras for extras, _ in calls.setups] == ["", "ui"]
    assert [argv[0] for argv, _ in calls.runs] == ["examples/quickstart_async.py", "-m"]


def test_a_venv_with_more_extras_covers_one_asked_for_with_none(dev: ModuleType) -> None:
    with_ui = dev.wanted_stamp("ui", demo=True)
    assert dev.stamp_covers(with_ui, dev.wanted_stamp("", demo=True))
    assert not dev.stamp_covers(dev.wanted_stamp("", demo=True), with_ui)
