"""Helpers for the host-application tests: run a host's tools as a deploy would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy import MetaData, Table, create_engine, inspect, select
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger.engine import URL_ENV

ROOT = Path(__file__).resolve().parents[2]
HOST_APP = ROOT / "examples" / "host_app"
SINGLE_PIPELINE = ROOT / "docs" / "examples" / "single_pipeline"
BIN = Path(sys.executable).parent


def url_text(url: URL) -> str:
    return url.render_as_string(hide_password=False)


def run(
    *argv: str | Path, url: URL, cwd: Path, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run a deploy tool as a pipeline would: DATABASE_URL set, the venv's scripts on PATH."""
    env = {key: value for key, value in os.environ.items() if key != URL_ENV}
    env["DATABASE_URL"] = url_text(url)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        [str(arg) for arg in argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    if check:
        assert done.returncode == 0, f"{argv}\n{done.stdout}\n{done.stderr}"
    return done


def versions(url: URL, table: str) -> set[str]:
    """The revisions recorded in the version table ``table`` (empty when it is absent)."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            if not inspect(connection).has_table(table):
                return set()
            version = Table(table, MetaData(), autoload_with=connection)
            return set(connection.scalars(select(version.c.version_num)))
    finally:
        engine.dispose()


def table_names(url: URL) -> set[str]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
