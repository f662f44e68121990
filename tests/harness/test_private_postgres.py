"""The private PostgreSQL: a real server, reachable at its URL, gone with the run that
started it, however that run ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from .. import private_postgres
from ..backends import POSTGRES_ENV
from ..databases import IN_CI

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _wheel_installed() -> None:
    try:
        private_postgres.wheel_binaries()
    except ImportError as error:
        message = f"{error} (it comes with the test extra: pip install -e '.[test]')"
        if IN_CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _gone(pid: int, folder: Path, within_s: float = 60) -> bool:
    deadline = time.monotonic() + within_s
    while _running(pid) or folder.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _server_version(url: str) -> str:
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres") as connection:
        row = connection.execute("SHOW server_version_num").fetchone()
    assert row is not None
    return str(row[0])


@pytest.fixture(scope="module")
def server() -> Iterator[private_postgres.PrivatePostgres]:
    started = private_postgres.start("agentledger_test")
    try:
        yield started
    finally:
        started.close()


def test_the_private_server_answers_at_its_url(server: private_postgres.PrivatePostgres) -> None:
    assert server.url.startswith("postgresql://postgres@127.0.0.1:")
    assert _server_version(server.url).startswith(server.version)


def test_as_root_the_private_server_runs_as_nobody(
    server: private_postgres.PrivatePostgres,
) -> None:
    import pwd

    owner = Path(f"/proc/{server.pid}").stat().st_uid
    root = os.geteuid() == 0
    assert owner == (pwd.getpwnam("nobody").pw_uid if root else os.geteuid())


def test_closing_stops_the_server_and_deletes_its_folder() -> None:
    server = private_postgres.start("agentledger_test")
    server.close()

    assert _gone(server.pid, server.folder)


def test_binaries_the_server_user_cannot_reach_are_copied_first() -> None:
    patched = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from tests import private_postgres as p; "
        "p._reachable = lambda *args: False; p._keep('agentledger_test')"
    )
    keeper = subprocess.Popen(
        [sys.executable, "-c", patched, str(ROOT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert keeper.stdout is not None and keeper.stdin is not None
    report = json.loads(keeper.stdout.readline())
    try:
        executable = Path(f"/proc/{report['pid']}/exe").resolve()
        assert executable.is_relative_to(report["folder"])
        assert _server_version(report["url"]).startswith(report["version"])
    finally:
        keeper.stdin.close()
        keeper.wait(timeout=60)
    assert _gone(report["pid"], Path(report["folder"]))


_WAITING_TEST = """
import json, os, time
from tests.databases import server_url_or_skip
from tests import databases

def test_holds_the_private_server():
    server_url_or_skip("postgresql")
    private = databases.private_server()
    with open(os.environ["REPORT"], "w") as report:
        json.dump({"pid": private.pid, "folder": str(private.folder)}, report)
    time.sleep(600)
"""


@pytest.mark.parametrize(
    "ending",
    [pytest.param(signal.SIGINT, id="ctrl-c"), pytest.param(signal.SIGKILL, id="killed")],
)
def test_a_test_run_that_is_interrupted_leaves_no_server_behind(
    ending: signal.Signals, tmp_path: Path
) -> None:
    (tmp_path / "conftest.py").write_text("from tests.conftest import *  # noqa: F403\n")
    (tmp_path / "test_waiting.py").write_text(_WAITING_TEST)
    report = tmp_path / "report.json"
    env = {key: value for key, value in os.environ.items() if key != POSTGRES_ENV}
    env.update(PYTHONPATH=str(ROOT), REPORT=str(report), CI="")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)]
    run = subprocess.Popen(
        command,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    try:
        deadline = time.monotonic() + 120
        while not report.exists() or not report.read_text():
            assert run.poll() is None, run.communicate()[0].decode()
            assert time.monotonic() < deadline, "the private server did not start"
            time.sleep(0.1)
        held = json.loads(report.read_text())
        assert _running(held["pid"])

        os.killpg(run.pid, ending)  # what Ctrl-C does to the whole foreground job
        output = run.communicate(timeout=120)[0].decode()
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()

    assert _gone(held["pid"], Path(held["folder"])), output


def test_a_keeper_that_reports_an_error_is_left_to_clean_up_before_start_fails(
    tmp_path: Path,
) -> None:
    # A keeper reports its error, then stops what it had started: launch_keeper waits for
    # it instead of killing it (which left a started server and its folder behind).
    cleaned = tmp_path / "cleaned"
    script = tmp_path / "keeper.py"
    script.write_text(
        "import json, sys, time\n"
        "print(json.dumps({'error': 'the standby did not start'}), flush=True)\n"
        "time.sleep(0.5)\n"
        f"open({str(cleaned)!r}, 'w').close()\n"
    )
    with pytest.raises(private_postgres.StartError, match="the standby did not start"):
        private_postgres.launch_keeper(script, what="a test keeper")
    assert cleaned.exists()
