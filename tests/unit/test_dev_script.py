"""dev.py's test command: which pytests it runs side by side under CI, on which
databases, and how their outcomes make its own (CI runs it, but a wrong split would
still pass there: a test selected by none of the pytests is never run)."""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

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


def _ci(monkeypatch: pytest.MonkeyPatch, *, mysql: str | None) -> None:
    monkeypatch.setenv("AGENTLEDGER_TEST_EMBEDDED_PASS", "-m postgresql")
    monkeypatch.setenv("AGENTLEDGER_TEST_POSTGRES_URL", POSTGRES)
    if mysql is None:
        monkeypatch.delenv("AGENTLEDGER_TEST_MYSQL_URL", raising=False)
    else:
        monkeypatch.setenv("AGENTLEDGER_TEST_MYSQL_URL", mysql)


def test_without_a_second_pass_the_suite_is_one_pytest_with_the_arguments_given(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTLEDGER_TEST_EMBEDDED_PASS", raising=False)
    pytests = _Pytests(dev, monkeypatch, [0])
    assert dev.test(["-k", "messages"]) == 0
    assert [argv for argv, _ in pytests.front] == [["-m", "pytest", "-k", "messages"]]
    assert pytests.beside == []


def test_under_ci_the_mariadb_only_tests_and_the_private_postgresql_pass_run_beside(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ci(monkeypatch, mysql=MYSQL)
    pytests = _Pytests(dev, monkeypatch, [0, 0, 0])
    assert dev.test(["-q"]) == 0
    [(front, front_env)] = pytests.front
    assert front == ["-m", "pytest", "-q", "-m", "not (mysql and not postgresql)"]
    assert front_env["AGENTLEDGER_TEST_MYSQL_URL"] == (
        "mysql://root@127.0.0.1:3306/agentledger_test_rest?charset=utf8mb4"
    )
    (private, private_env), (mariadb, mariadb_env) = pytests.beside
    assert private == ["-m", "pytest", "-q", "-m", "postgresql"]
    assert private_env["AGENTLEDGER_TEST_POSTGRES_URL"] == "embedded"
    assert mariadb == ["-m", "pytest", "-q", "-m", "mysql and not postgresql"]
    assert mariadb_env["AGENTLEDGER_TEST_MYSQL_URL"] == MYSQL


def test_without_a_mariadb_server_only_the_private_postgresql_pass_runs_beside(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ci(monkeypatch, mysql=None)
    pytests = _Pytests(dev, monkeypatch, [0, 0])
    assert dev.test([]) == 0
    assert [argv for argv, _ in pytests.front] == [["-m", "pytest"]]
    assert [argv for argv, _ in pytests.beside] == [["-m", "pytest", "-m", "postgresql"]]


@pytest.mark.parametrize(
    ("codes", "expected"),
    [([0, 0, 1], 1), ([0, 3, 0], 3), ([2, 1, 0], 2), ([0, 0, 0], 0)],
    ids=["mariadb-beside-fails", "private-beside-fails", "front-fails-first", "all-pass"],
)
def test_the_runs_exit_code_is_the_front_pytests_failure_else_one_beside(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch, codes: list[int], expected: int
) -> None:
    # codes: the front pytest's exit code, the private PostgreSQL pass's, MariaDB's.
    _ci(monkeypatch, mysql=MYSQL)
    _Pytests(dev, monkeypatch, codes)
    assert dev.test([]) == expected


def test_a_pytest_beside_that_selects_no_test_does_not_fail_the_run(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `dev.py test tests/unit` under CI: no PostgreSQL test among the ones asked for.
    _ci(monkeypatch, mysql=None)
    _Pytests(dev, monkeypatch, [0, dev.NO_TESTS_COLLECTED])
    assert dev.test(["tests/unit"]) == 0


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
