"""The README tells the truth: its quickstart code runs, its demo output is real, each
command it shows is run by a test, and every link in it leads somewhere. The rest of
what it used to say lives in docs/, checked there (tests/docs/test_docs.py,
tests/docs/test_facts.py, tests/docs/test_site.py)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
MAX_LINES = 250

INSTALL = "test_the_install_commands_install_agentledger_from_a_checkout"
SITE = "test_the_site_builds_strict_without_a_warning"
COMMANDS = {
    # Each command the README shows (in a sh block, or inline), and the test that runs it.
    "pip install -e .": INSTALL,
    "pip install -e '.[postgres]'": INSTALL,
    "pip install -e '.[mysql]'": INSTALL,
    "pip install -e '.[docs]'": INSTALL,
    "python3 dev.py demo": "test_the_demo_command_runs_the_async_quickstart",
    "python3 dev.py test": "test_ci_runs_the_test_command_the_readme_gives",
    "python -m agentledger": "test_the_demo_venvs_command_line_lists_sessions",
    "python3 dev.py ui": "tests/harness/test_dev_script.py::"
    "test_the_viewer_command_adds_the_ui_extra_and_opens_the_demos_database",
    ".venv-demo/bin/agentledger sessions list": "test_the_demo_venvs_command_line_lists_sessions",
    "mkdocs build --strict": f"tests/docs/test_site.py::{SITE}",
}
COMMAND_WORDS = ("pip ", "python3 ", "python ", "mkdocs ", "agentledger ", ".venv/", ".venv-demo/")


def section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def shell_lines(text: str) -> list[str]:
    """The commands of the ``sh`` blocks of ``text``, comments left out."""
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    lines = (line.split("  #")[0].strip() for block in blocks for line in block.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def inline_commands(text: str) -> list[str]:
    """The commands written as inline code in the prose of ``text``."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    spans = re.findall(r"`([^`\n]+)`", prose)
    return [span for span in spans if span.startswith(COMMAND_WORDS) and " " in span]


def test_the_readme_is_short() -> None:
    assert len(README.splitlines()) <= MAX_LINES


def test_every_command_in_the_readme_is_run_by_a_named_test() -> None:
    shown = shell_lines(README) + inline_commands(README)
    assert set(shown) <= set(COMMANDS), set(shown) - set(COMMANDS)
    assert set(COMMANDS) <= set(shown), "a command no longer shown: drop it from COMMANDS"
    for test in COMMANDS.values():
        where, name = test.split("::") if "::" in test else (__file__, test)
        assert f"def {name}(" in (ROOT / where).read_text(), test


def test_every_relative_link_in_the_readme_exists() -> None:
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    relative = [link for link in links if "://" not in link]
    assert len(relative) > 30
    missing = [link for link in relative if not (ROOT / link).exists()]
    assert not missing


def test_the_quickstart_is_the_tutorials_first_program() -> None:
    (code,) = re.findall(r"```python\n(.*?)```", section("Quickstart"), re.S)
    assert code == (ROOT / "docs" / "examples" / "first_ledger.py").read_text()


def test_the_quickstart_code_runs_and_prints_the_session(tmp_path: Path) -> None:
    (code,) = re.findall(r"```python\n(.*?)```", section("Quickstart"), re.S)[:1]
    script = tmp_path / "readme_quickstart.py"
    script.write_text(code)
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "trip-planner",
        "Planning",
        "a",
        "trip",
        "to",
        "Lisbon",
        "completed",
        "2",
        "44",
    ]
    assert f"It prints `{result.stdout.strip()}`" in README


def test_the_demo_output_shown_is_what_the_demo_prints(tmp_path: Path) -> None:
    shown = re.search(r"\$ python3 dev.py demo\n(.*?)```", README, re.S)
    assert shown is not None
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart_async.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == shown.group(1)


def test_the_demo_command_runs_the_async_quickstart(monkeypatch: pytest.MonkeyPatch) -> None:
    # dev.py's own set-up (a .venv of every extra) is what CI runs; here, what it then runs.
    spec = importlib.util.spec_from_file_location("agentledger_dev_script", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    ran: list[list[str]] = []
    monkeypatch.setattr(dev, "setup", lambda *extras: None)
    monkeypatch.setattr(dev, "run", lambda argv, env=None, venv_dir=None: ran.append(argv) or 0)

    assert dev.main(["demo"]) == 0
    assert ran == [["examples/quickstart_async.py"]]


def test_the_demo_venvs_command_line_lists_sessions(tmp_path: Path) -> None:
    """What the README says to run after the demo: the venv's ``agentledger`` script and
    ``python -m agentledger`` (here the test venv's, which is installed the same way)."""
    subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart_sync.py")],
        cwd=tmp_path, check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    script = Path(sys.executable).parent / "agentledger"
    for command in ([str(script)], [sys.executable, "-m", "agentledger"]):
        listed = subprocess.run(
            [*command, "sessions", "list"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert listed.returncode == 0, listed.stderr
        assert "trip-planner" in listed.stdout


def test_ci_runs_the_test_command_the_readme_gives() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "python3 dev.py test" in shell_lines(section("Two commands"))
    assert "python3 dev.py test" in ci


@pytest.mark.slow
def test_the_install_commands_install_agentledger_from_a_checkout(tmp_path: Path) -> None:
    """Each install command, run in a fresh virtual environment from a copy of the checkout.
    ``--no-deps``: the dependencies come from the package index, which is not what this
    checks; the build of the project and its extras' names are."""
    checkout = tmp_path / "agentledger"
    checkout.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "alembic.ini"):
        shutil.copy(ROOT / name, checkout)
    ignore = shutil.ignore_patterns("__pycache__")
    for name in ("src", "alembic"):
        shutil.copytree(ROOT / name, checkout / name, ignore=ignore)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    installs = [command for command in COMMANDS if COMMANDS[command] == INSTALL]
    for line in installs:
        words = line.replace("'", "").split()
        assert words[:3] == ["pip", "install", "-e"], line
        done = subprocess.run(
            [bin_dir / "python", "-m", "pip", "install", "--quiet", "--no-deps", *words[2:]],
            cwd=checkout,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
    shown = subprocess.run(
        [bin_dir / "python", "-m", "pip", "show", "agentledger"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Name: agentledger" in shown.stdout
    assert (bin_dir / "agentledger").exists()
