"""Test databases: server URLs from the environment, created on demand, migrated once
per run, emptied between tests; scratch databases for tests that need an empty one.

The fixtures at the end (``scratch_url``, ``migrated_url``) are parametrised over
DIALECTS and re-exported by tests/conftest.py.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger import migrations
from agentledger.models import metadata

from .backends import MYSQL_ENV, POSTGRES_ENV

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
_ENV_OF = {"postgresql": POSTGRES_ENV, "mysql": MYSQL_ENV}
_EXAMPLE = {
    "postgresql": "postgresql://postgres@127.0.0.1:5432/agentledger_test",
    "mysql": "mysql://root@127.0.0.1:3306/agentledger_test",
}


def server_url_or_skip(dialect: str) -> URL:
    """The configured server URL for ``dialect`` (sync driver), or skip; fail under CI."""
    from sqlalchemy.engine import make_url

    env = _ENV_OF[dialect]
    raw = os.environ.get(env)
    if not raw:
        message = f"{dialect} tests need a server: set {env}, e.g. {env}={_EXAMPLE[dialect]}"
        if IN_CI:
            pytest.fail(f"CI=true but {env} is not set. {message}", pytrace=False)
        pytest.skip(message)
    url = make_url(raw)
    driver = "psycopg" if dialect == "postgresql" else "pymysql"
    url = url.set(drivername=f"{url.get_backend_name()}+{driver}")
    ensure_database(url)
    return url


def _admin_url(url: URL) -> URL:
    # URL.set() ignores None, so clearing the database name needs _replace.
    if url.get_backend_name() == "postgresql":
        return url.set(database="postgres")
    return url._replace(database=None)


def ensure_database(url: URL) -> None:
    """Create the database ``url`` names when it does not exist yet."""
    engine = create_engine(_admin_url(url), poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            if url.get_backend_name() == "postgresql":
                found = connection.execute(
                    text("SELECT 1 FROM pg_database WHERE datname = :name"),
                    {"name": url.database},
                ).first()
                if not found:
                    connection.execute(text(f'CREATE DATABASE "{url.database}"'))
            else:
                connection.execute(text(f"CREATE DATABASE IF NOT EXISTS `{url.database}`"))
    except Exception as exc:  # a server that is down is a skip on a laptop, a failure in CI
        message = f"cannot reach {url.render_as_string(hide_password=True)}: {exc}"
        if IN_CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    finally:
        engine.dispose()


def drop_database(url: URL) -> None:
    engine = create_engine(_admin_url(url), poolclass=NullPool, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        if url.get_backend_name() == "postgresql":
            connection.execute(text(f'DROP DATABASE IF EXISTS "{url.database}" WITH (FORCE)'))
        else:
            connection.execute(text(f"DROP DATABASE IF EXISTS `{url.database}`"))
    engine.dispose()


@contextmanager
def scratch_database(dialect: str, tmp_dir: str) -> Iterator[URL]:
    """A fresh, empty database of ``dialect`` (sync driver URL), dropped afterwards."""
    from sqlalchemy.engine import make_url

    if dialect == "sqlite":
        yield make_url(f"sqlite+pysqlite:///{tmp_dir}/scratch-{uuid.uuid4().hex}.db")
        return
    base = server_url_or_skip(dialect)
    url = base.set(database=f"{base.database}_scratch_{uuid.uuid4().hex[:8]}")
    ensure_database(url)
    try:
        yield url
    finally:
        drop_database(url)


def empty_tables(url: URL) -> None:
    """Delete every agentledger row, children first: faster than re-migrating."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            for table in reversed(metadata.sorted_tables):
                connection.execute(table.delete())
    finally:
        engine.dispose()


def migrated(url: URL) -> URL:
    migrations.upgrade(url)
    return url


DIALECTS = ("sqlite", "postgresql", "mysql")
"""Every database agentledger runs on; ``mysql`` is MariaDB here (MySQL 8 is a known gap)."""
_MARKS = {
    "sqlite": pytest.mark.sqlite,
    "postgresql": pytest.mark.postgresql,
    "mysql": pytest.mark.mysql,
}


def dialect_params(*dialects: str) -> list[Any]:
    """``pytest.param`` per dialect (default: all), each with its marker."""
    return [pytest.param(name, marks=_MARKS[name], id=name) for name in dialects or DIALECTS]


@pytest.fixture(params=dialect_params())
def scratch_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[URL]:
    """An empty database of each dialect (sync driver URL), dropped afterwards."""
    with scratch_database(request.param, str(tmp_path)) as url:
        yield url


@pytest.fixture(scope="module", params=dialect_params())
def migrated_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[URL]:
    """A database of each dialect migrated to head, shared by one module's tests."""
    with scratch_database(request.param, str(tmp_path_factory.mktemp("migrated"))) as url:
        yield migrated(url)
