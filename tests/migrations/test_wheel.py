"""The built wheel carries the migrations and `agentledger db upgrade` works from a
fresh virtual environment with no checkout in sight (T11)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from agentledger import migrations
from agentledger.engine import URL_ENV
from agentledger.models import VERSION_TABLE

from ._support import OUR_TABLES

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.sqlite]


def _run(*argv: str | Path, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    # No PYTHONPATH and no URL from the caller: the installed wheel must stand alone.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", URL_ENV, "VIRTUAL_ENV")}
    done = subprocess.run(
        [str(arg) for arg in argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{argv}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    _run(sys.executable, "-m", "build", "--wheel", "--outdir", dist, ROOT, cwd=dist)
    (built,) = dist.glob("agentledger-*.whl")
    return built


def test_the_wheel_carries_the_migrations_as_a_package_resource(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())

    assert "agentledger/_migrations/env.py" in names
    assert "agentledger/_migrations/script.py.mako" in names
    assert "agentledger/_migrations/versions/0001_initial_schema.py" in names
    assert "agentledger/py.typed" in names
    assert not any(name.startswith("alembic/") for name in names)  # would shadow Alembic
    assert not any(name.startswith("tests/") for name in names)
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in names)
    assert "agentledger/_migrations/__init__.py" not in names


def test_agentledger_db_upgrade_works_from_a_fresh_venv(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    _run(bin_dir / "python", "-m", "pip", "install", "--quiet", wheel, cwd=tmp_path)
    database = tmp_path / "x.db"

    upgraded = _run(
        bin_dir / "agentledger", "db", "upgrade", "--url", f"sqlite:///{database}", cwd=tmp_path
    )

    assert f"{migrations.head()} (head)" in upgraded.stdout
    with sqlite3.connect(database) as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        (version,) = connection.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchone()
    assert OUR_TABLES | {VERSION_TABLE} <= tables
    assert version == migrations.head()

    where = _run(
        bin_dir / "python",
        "-c",
        "import agentledger.migrations as m; print(m.script_location())",
        cwd=tmp_path,
    )
    assert str(venv) in where.stdout, "the scripts must come from the installed wheel"
