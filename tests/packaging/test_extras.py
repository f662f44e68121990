"""Each extra, installed alone into a fresh venv, is enough for what it is documented
for: the quickstarts on each database, each framework's example, the viewer's delete
confirmation (a form: Starlette parses it with python-multipart). The test venv holds
every extra at once, so it would hide a dependency an extra forgot."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.parse
import urllib.request
import venv
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agentledger.cli.ui import UI_PACKAGES

from ..databases import scratch_database
from ..ports import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
INSTALL_TIMEOUT = 600
RUN_TIMEOUT = 180


def fresh_venv(where: Path, extra: str) -> Path:
    """A new venv holding agentledger installed from this checkout with ``extra`` only;
    the folder of its scripts."""
    venv.create(where, with_pip=True)
    scripts = where / "bin"
    project = f"{ROOT}[{extra}]" if extra else str(ROOT)
    installed = subprocess.run(
        [scripts / "python", "-m", "pip", "install", "--quiet", "--no-compile", "-e", project],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return scripts


def run_in(scripts: Path, *command: str | Path, cwd: Path) -> str:
    """Run ``command`` with the venv's Python; its output, failing the test on an error."""
    done = subprocess.run(
        [scripts / "python", *command], cwd=cwd, capture_output=True, text=True, timeout=RUN_TIMEOUT
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def run_both_quickstarts(scripts: Path, url: str, cwd: Path) -> None:
    """The async quickstart, then the sync one on the database it left."""
    first = run_in(scripts, EXAMPLES / "quickstart_async.py", url, cwd=cwd)
    assert "paused at checkpoint #1" in first and "completed" in first
    second = run_in(scripts, EXAMPLES / "quickstart_sync.py", url, cwd=cwd)
    assert "found session trip-planner" in second


def test_agentledger_alone_runs_both_quickstarts_on_sqlite(tmp_path: Path) -> None:
    scripts = fresh_venv(tmp_path / "venv", "")
    run_both_quickstarts(scripts, f"sqlite:///{tmp_path / 'demo.db'}", tmp_path)


@pytest.mark.parametrize(("extra", "dialect"), [("postgres", "postgresql"), ("mysql", "mysql")])
def test_a_database_extra_runs_both_quickstarts_through_its_drivers(
    extra: str, dialect: str, tmp_path: Path
) -> None:
    scripts = fresh_venv(tmp_path / "venv", extra)
    with scratch_database(dialect, str(tmp_path)) as url:
        # The URL without a driver: the ledgers pick the extra's (async and sync).
        plain = url.set(drivername=url.get_backend_name()).render_as_string(hide_password=False)
        run_both_quickstarts(scripts, plain, tmp_path)


def test_the_langgraph_extra_pauses_the_example_graph_and_resumes_it(tmp_path: Path) -> None:
    scripts = fresh_venv(tmp_path / "venv", "langgraph")
    url = f"sqlite:///{tmp_path / 'graph.db'}"
    example = EXAMPLES / "langgraph_approval.py"
    assert "paused: refund 120 EUR" in run_in(scripts, example, url, cwd=tmp_path)
    assert "resumed: approved by ada" in run_in(scripts, example, url, cwd=tmp_path)


def test_the_openai_agents_extra_runs_the_sdk_example_twice(tmp_path: Path) -> None:
    scripts = fresh_venv(tmp_path / "venv", "openai-agents")
    url = f"sqlite:///{tmp_path / 'sdk.db'}"
    example = EXAMPLES / "openai_agents_session.py"
    run_in(scripts, example, url, cwd=tmp_path)
    second = run_in(scripts, example, url, cwd=tmp_path)
    assert "session ada-lisbon-trip holds 6 items" in second


def test_the_adk_extra_runs_the_adk_example_twice(tmp_path: Path) -> None:
    scripts = fresh_venv(tmp_path / "venv", "adk")
    url = f"sqlite:///{tmp_path / 'adk.db'}"
    example = EXAMPLES / "adk_session.py"
    run_in(scripts, example, url, cwd=tmp_path)
    assert "'booked': 'Lisbon'" in run_in(scripts, example, url, cwd=tmp_path)


def test_the_ui_extra_serves_the_viewer_and_its_delete_confirmation(tmp_path: Path) -> None:
    scripts = fresh_venv(tmp_path / "venv", "ui")
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    run_in(scripts, EXAMPLES / "quickstart_sync.py", url, cwd=tmp_path)
    with viewer(scripts, url, tmp_path) as address:
        assert "trip-planner" in fetch(f"{address}/sessions")
        form = fetch(f"{address}/sessions/trip-planner/delete")
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', form)
        assert csrf is not None, form
        posted = urllib.parse.urlencode({"csrf": csrf.group(1)}).encode()
        assert "trip-planner" in fetch(f"{address}/sessions/trip-planner/delete", posted)
        with pytest.raises(urllib.error.HTTPError) as gone:
            fetch(f"{address}/sessions/trip-planner.json")
        assert gone.value.code == 404


def test_the_viewers_package_check_names_every_module_of_the_ui_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    ui_extra = project["optional-dependencies"]["ui"]
    names = [re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0] for requirement in ui_extra]
    assert sorted(name.replace("-", "_") for name in names) == sorted(UI_PACKAGES)


def fetch(address: str, data: bytes | None = None) -> str:
    with urllib.request.urlopen(address, data=data, timeout=30) as response:
        return str(response.read().decode())


@contextmanager
def viewer(scripts: Path, url: str, cwd: Path) -> Iterator[str]:
    """``agentledger ui --allow-delete`` from the venv's scripts, until the block ends;
    its address."""
    port = free_port()
    command = [scripts / "agentledger", "ui", "--url", url, "--allow-delete", "--port", str(port)]
    process = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    address = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not answers(f"{address}/sessions"):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the viewer did not answer at {address}", pytrace=False)
            time.sleep(0.2)
        yield address
    finally:
        process.terminate()
        try:
            process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


def answers(address: str) -> bool:
    try:
        fetch(address)
    except OSError:
        return False
    return True


if sys.platform == "win32":  # pragma: no cover - the venv layout differs (Scripts\)
    pytest.skip("the fresh venvs here are laid out for POSIX", allow_module_level=True)
