"""Plain `alembic` from the repository root runs the same environment as the library."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import URL

from agentledger import migrations
from agentledger.engine import URL_ENV
from agentledger.models import VERSION_TABLE

from ..databases import scratch_database
from ._support import OUR_TABLES, drift, our_table_names

ROOT = Path(__file__).resolve().parents[2]


def _alembic(*args: str, url_env: str | None = None) -> subprocess.CompletedProcess[str]:
    alembic = Path(sys.executable).parent / "alembic"
    if not alembic.exists():
        pytest.skip(f"no alembic script next to {sys.executable}")
    env = {k: v for k, v in os.environ.items() if k != URL_ENV}
    if url_env is not None:
        env[URL_ENV] = url_env
    return subprocess.run(
        [str(alembic), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_alembic_upgrade_head_with_an_x_url(scratch_url: URL) -> None:
    done = _alembic("-x", f"url={scratch_url.render_as_string(False)}", "upgrade", "head")

    assert done.returncode == 0, done.stderr
    assert our_table_names(scratch_url) == OUR_TABLES | {VERSION_TABLE}
    assert drift(scratch_url) == []


@pytest.mark.sqlite
def test_alembic_reads_the_url_from_the_environment(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'env.db'}"
    done = _alembic("upgrade", "head", url_env=url)

    assert done.returncode == 0, done.stderr
    assert migrations.current(url) == migrations.head()


@pytest.mark.postgresql
def test_alembic_with_an_x_schema(tmp_path: Path) -> None:
    with scratch_database("postgresql", str(tmp_path)) as url:
        target = url.render_as_string(False)
        done = _alembic("-x", f"url={target}", "-x", "schema=agents", "upgrade", "head")
        assert done.returncode == 0, done.stderr
        assert our_table_names(url, schema="agents") == OUR_TABLES | {VERSION_TABLE}
        assert our_table_names(url) == set()


def test_alembic_sql_renders_for_postgresql_and_refuses_sqlite() -> None:
    rendered = _alembic("-x", "url=postgresql://", "upgrade", "head", "--sql")
    assert rendered.returncode == 0, rendered.stderr
    assert "CREATE TABLE agentledger_sessions (" in rendered.stdout

    refused = _alembic("-x", "url=sqlite:///x.db", "upgrade", "head", "--sql")
    assert refused.returncode != 0
    assert "not available for SQLite" in refused.stderr
