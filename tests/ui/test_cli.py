"""``agentledger ui``: what it refuses before serving, what it says when the ui extra is
missing, that it serves, and that the database password reaches no page and no output."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from agentledger import Ledger
from agentledger.cli import EXIT_ERROR, EXIT_SCHEMA, EXIT_USAGE, main
from agentledger.ui import create_app, is_loopback

from ..ports import free_port
from ._data import Clock, fill


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with Ledger(url, clock=Clock()) as ledger:
        ledger.upgrade()
        fill(ledger)
    return url


@contextmanager
def serving(*args: str, **env_vars: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``agentledger ui ARGS`` on a free port, until the block ends; yields its base URL."""
    port = free_port()
    command = [sys.executable, "-m", "agentledger", "ui", "--port", str(port), *args]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **env_vars}
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{base}/static/app.css", timeout=1).close()
                break
            except urllib.error.HTTPError:  # up, and asking for its token
                break
            except OSError:
                if process.poll() is not None:
                    raise AssertionError(process.stdout.read() if process.stdout else "") from None
                time.sleep(0.05)
        yield base, process
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_loopback_addresses_need_no_token(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.org"])
def test_other_addresses_are_not_loopback(host: str) -> None:
    assert not is_loopback(host)


def test_another_address_than_loopback_without_a_token_is_refused(
    sqlite_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTLEDGER_UI_TOKEN", raising=False)
    assert main(["ui", "--url", sqlite_url, "--host", "0.0.0.0"]) == EXIT_USAGE
    assert "--token" in capsys.readouterr().err


def test_a_missing_database_file_is_refused_before_serving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ui", "--url", f"sqlite:///{tmp_path / 'none.db'}"]) == EXIT_SCHEMA
    assert not (tmp_path / "none.db").exists()


def test_without_the_ui_extra_the_command_names_the_extra_to_install(
    sqlite_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    assert main(["ui", "--url", sqlite_url]) == EXIT_ERROR
    assert "pip install 'agentledger[ui]'" in capsys.readouterr().err


@pytest.mark.slow
def test_the_command_serves_the_viewer_and_prints_no_password(sqlite_url: str) -> None:
    with serving("--url", sqlite_url) as (base, process):
        page = urllib.request.urlopen(f"{base}/sessions/trip-lisbon", timeout=5).read().decode()
        assert "Plan a trip to Lisbon" in page
    output = process.stdout.read() if process.stdout else ""
    assert f"on {base}/" in output and "read-only" in output


@pytest.mark.slow
def test_the_token_from_the_environment_guards_every_request(sqlite_url: str) -> None:
    with serving("--url", sqlite_url, AGENTLEDGER_UI_TOKEN="from-env") as (base, _):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{base}/sessions", timeout=5)
        assert refused.value.code == 401
        bearer = {"Authorization": "Bearer from-env"}
        request = urllib.request.Request(f"{base}/sessions.json", headers=bearer)
        assert urllib.request.urlopen(request, timeout=5).status == 200


def test_an_unreachable_database_gives_an_error_page_without_its_password() -> None:
    url = f"postgresql://agent:hunter2-secret@127.0.0.1:{free_port()}/agents"
    with TestClient(create_app(url)) as client:
        answer = client.get("/sessions")
    assert answer.status_code == 500
    assert "hunter2" not in answer.text
    assert "agent:***@127.0.0.1" in answer.text


def test_the_viewer_shows_the_demos_conversation_checkpoints_grant_and_tokens(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'agentledger.db'}"
    demo = Path(__file__).resolve().parents[2] / "examples" / "quickstart_sync.py"
    subprocess.run([sys.executable, str(demo), url], check=True, capture_output=True, timeout=120)
    with TestClient(create_app(url)) as client:
        view = client.get("/sessions/trip-planner.json").json()
    assert [m["role"] for m in view["messages"]] == ["user", "assistant", "tool", "assistant"]
    ((paused, resumed),) = view["checkpoints"]["branches"]
    assert not paused["latest"] and resumed["latest"] and resumed["parent_ref"] == paused["ref"]
    assert [g["capability"] for g in view["grants"]] == ["tool:museum-search"]
    assert view["session"]["total_tokens"] == 52


def test_a_long_chain_of_checkpoints_is_one_flat_branch(sqlite_url: str) -> None:
    with Ledger(sqlite_url) as ledger:
        ledger.sessions.create("many-saves")
        for n in range(210):
            ledger.checkpoints.save("many-saves", {"runtime_state": {"n": n}})
    with TestClient(create_app(sqlite_url)) as client:
        (chain,) = client.get("/sessions/many-saves.json").json()["checkpoints"]["branches"]
        page = client.get("/sessions/many-saves")
    assert [node["seq"] for node in chain] == list(range(11, 211))
    assert chain[0]["parent_missing"] and chain[-1]["latest"]
    assert page.status_code == 200 and page.text.count('<ol class="tree">') == 1
