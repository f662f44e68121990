"""The built wheel carries the migrations and `agentledger db upgrade` works from a
fresh virtual environment with no checkout in sight (T11)."""

from __future__ import annotations

import os
import shutil
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


def _run(
    *argv: str | Path, cwd: Path, timeout: float = 240, **extra_env: str
) -> subprocess.CompletedProcess[str]:
    # No PYTHONPATH and no URL from the caller: the installed wheel must stand alone.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", URL_ENV, "VIRTUAL_ENV")}
    env.update(extra_env)
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
    for script in (ROOT / "alembic" / "versions").glob("*.py"):
        assert f"agentledger/_migrations/versions/{script.name}" in names
    assert "agentledger/py.typed" in names
    assert not any(name.startswith("alembic/") for name in names)  # would shadow Alembic
    assert not any(name.startswith("tests/") for name in names)
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in names)
    assert "agentledger/_migrations/__init__.py" not in names


def test_the_wheel_carries_the_viewers_templates_and_assets(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    package = ROOT / "src" / "agentledger" / "ui"
    for folder in ("templates", "static"):
        for path in (package / folder).iterdir():
            assert f"agentledger/ui/{folder}/{path.name}" in names


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with only the wheel (and its dependencies) installed."""
    where = tmp_path_factory.mktemp("venv")
    _run(sys.executable, "-m", "venv", where, cwd=where)
    bin_dir = where / ("Scripts" if os.name == "nt" else "bin")
    _run(bin_dir / "python", "-m", "pip", "install", "--quiet", wheel, cwd=where)
    return where


def test_agentledger_db_upgrade_works_from_a_fresh_venv(venv: Path, tmp_path: Path) -> None:
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
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


def test_a_host_mounts_the_packaged_versions_as_documented(venv: Path, tmp_path: Path) -> None:
    # docs/examples/single_pipeline verbatim: version_locations names the package
    # resource agentledger:_migrations/versions, with path_separator = space.
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    project = tmp_path / "host"
    shutil.copytree(ROOT / "docs" / "examples" / "single_pipeline", project)
    database = tmp_path / "host.db"

    _run(bin_dir / "alembic", "upgrade", "heads", cwd=project, DATABASE_URL=f"sqlite:///{database}")

    with sqlite3.connect(database) as connection:
        stamped = {row[0] for row in connection.execute("SELECT version_num FROM alembic_version")}
    assert stamped == {"host_0001", migrations.head()}


CHECK = """
import sys
from alembic.config import Config
from agentledger.errors import SchemaError
from agentledger.migrations import check_host_config
try:
    check_host_config(Config(sys.argv[1]))
except SchemaError as error:
    print("refused:", error)
else:
    print("accepted")
"""


def test_path_separator_os_loses_the_packaged_versions_and_is_refused(
    venv: Path, tmp_path: Path
) -> None:
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    project = tmp_path / "host"
    shutil.copytree(ROOT / "docs" / "examples" / "single_pipeline", project)
    documented = project / "alembic.ini"
    with_os = project / "os.ini"
    with_os.write_text(
        documented.read_text()
        .replace("versions agentledger:", "versions:agentledger:")
        .replace("path_separator = space", "path_separator = os")
    )

    accepted = _run(bin_dir / "python", "-c", CHECK, documented, cwd=project)
    refused = _run(bin_dir / "python", "-c", CHECK, with_os, cwd=project)

    assert accepted.stdout.strip() == "accepted"
    assert refused.stdout.startswith("refused:") and "path_separator = os" in refused.stdout


def test_agentledger_ui_without_the_ui_extra_names_the_extra(venv: Path, tmp_path: Path) -> None:
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    done = subprocess.run(
        [str(bin_dir / "agentledger"), "ui", "--url", f"sqlite:///{tmp_path / 'x.db'}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "pip install 'agentledger[ui]'" in done.stderr
    assert "Traceback" not in done.stderr
