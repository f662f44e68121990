"""Test databases: server URLs from the environment, created on demand, migrated once
per run, emptied between tests; scratch databases for tests that need an empty one.

The fixtures at the end (``scratch_url``, ``migrated_url``) are parametrised over
DIALECTS and re-exported by tests/conftest.py.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool

from agentledger import AsyncLedger, Ledger, migrations
from agentledger._translate import translate
from agentledger.models import metadata

from . import private_postgres
from .backends import MYSQL_ENV, POSTGRES_ENV, by_driver
from .private_postgres import PrivatePostgres

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
EMBEDDED = "embedded"
"""The PostgreSQL URL variable's value that asks for the private server explicitly."""
_EXAMPLE_DATABASE = "agentledger_test"
_ENV_OF = {"postgresql": POSTGRES_ENV, "mysql": MYSQL_ENV}
_EXAMPLE = {
    "postgresql": f"postgresql://postgres@127.0.0.1:5432/{_EXAMPLE_DATABASE}",
    "mysql": f"mysql://root@127.0.0.1:3306/{_EXAMPLE_DATABASE}",
}


def server_url(dialect: str) -> URL | None:
    """The server to test ``dialect`` on (sync driver URL), or None when there is none.

    The URL in the environment wins. Without one (or with the value ``embedded``),
    PostgreSQL gets the private server of this run, started on first use and recorded
    in the environment so subprocesses and later callers find it. MariaDB has no
    wheel: without its URL there is no server.
    """
    raw = os.environ.get(_ENV_OF[dialect], "")
    if dialect == "postgresql" and raw in ("", EMBEDDED):
        raw = _private_postgres_url()
    if not raw:
        return None
    url = make_url(raw)
    driver = "psycopg" if dialect == "postgresql" else "pymysql"
    return url.set(drivername=f"{url.get_backend_name()}+{driver}")


def bench_url(dialect: str, suffix: str = "_bench") -> str | None:
    """A benchmark's own database beside the test database of ``dialect`` (the benchmark
    drops and recreates it), with the dialect's default driver; None without a server."""
    url = server_url(dialect)
    if url is None:
        return None
    url = url.set(drivername=url.get_backend_name(), database=f"{url.database}{suffix}")
    return url.render_as_string(hide_password=False)


def server_url_or_skip(dialect: str) -> URL:
    """The server URL for ``dialect`` (sync driver), its database created; else skip
    (fail under CI)."""
    url = server_url(dialect)
    if url is None:
        env = _ENV_OF[dialect]
        _unavailable(f"{dialect} tests need a server: set {env}, e.g. {env}={_EXAMPLE[dialect]}")
    ensure_database(url)
    return url


def _unavailable(message: str) -> NoReturn:
    if IN_CI:
        pytest.fail(f"CI=true, but {message}", pytrace=False)
    pytest.skip(message)


@dataclass
class _PrivateServer:
    """This run's private PostgreSQL: running, failed to start, or not needed yet."""

    running: PrivatePostgres | None = None
    failure: str | None = None
    version: str | None = None


_PRIVATE = _PrivateServer()


def _private_postgres_url() -> str:
    """The private PostgreSQL's URL, starting it on the first call of the run."""
    if _PRIVATE.running is None and _PRIVATE.failure is None:
        try:
            _PRIVATE.running = private_postgres.start(_EXAMPLE_DATABASE)
            _PRIVATE.version = _PRIVATE.running.version
            os.environ[POSTGRES_ENV] = _PRIVATE.running.url
        except private_postgres.StartError as error:
            _PRIVATE.failure = str(error)
    if _PRIVATE.running is None:
        _unavailable(
            f"postgresql tests need a server: {_PRIVATE.failure}; or set {POSTGRES_ENV}, "
            f"e.g. {POSTGRES_ENV}={_EXAMPLE['postgresql']}"
        )
    return _PRIVATE.running.url


def private_server() -> PrivatePostgres | None:
    """This run's private PostgreSQL while it runs, else None."""
    return _PRIVATE.running


def private_postgres_version() -> str | None:
    """The major version of this run's private PostgreSQL, when one was started."""
    return _PRIVATE.version


def stop_private_postgres() -> None:
    """Stop this run's private PostgreSQL (if one was started) and delete its folder."""
    if _PRIVATE.running is not None:
        _PRIVATE.running.close()
        _PRIVATE.running = None
        os.environ.pop(POSTGRES_ENV, None)


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


@contextmanager
def migrated_database(dialect: str, tmp_dir: str | Path) -> Iterator[URL]:
    """A fresh database of ``dialect`` (sync driver URL) migrated to head, dropped
    afterwards."""
    with scratch_database(dialect, str(tmp_dir)) as url:
        migrations.upgrade(url)
        yield url


def session_stored(url: URL, id: str) -> bool:
    """Whether session ``id`` is stored at ``url``, asked by a ledger of its own (a
    connection that shares nothing with the one that wrote it)."""
    with Ledger(url) as ledger:
        return ledger.sessions.exists(id)


EMPTYING_ATTEMPTS = 5
"""How often emptying the tables is tried: on a Galera cluster the DELETEs can lose
certification to the replication of a test's last writes (1213 at COMMIT), which
agentledger itself would retry (a CI run saw it after 10,000 messages)."""


def empty_tables(url: URL) -> None:
    """Delete every agentledger row, children first: faster than re-migrating."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        for attempt in range(1, EMPTYING_ATTEMPTS + 1):
            try:
                with engine.begin() as connection:
                    for table in reversed(metadata.sorted_tables):
                        connection.execute(table.delete())
                return
            except DBAPIError as error:
                if attempt == EMPTYING_ATTEMPTS or not translate(error, url).retryable:
                    raise
    finally:
        engine.dispose()


def migrated(url: URL) -> URL:
    migrations.upgrade(url)
    return url


_MIGRATED: dict[str, URL] = {}


def migrated_once(dialect: str, tmp_path_factory: pytest.TempPathFactory) -> URL:
    """A migrated database of ``dialect`` (sync driver URL) that the run's tests share,
    made at first use: a SQLite file in a temporary folder, else the server's database."""
    if dialect not in _MIGRATED:
        if dialect == "sqlite":
            path = tmp_path_factory.mktemp("migrated-once") / "ledger.db"
            url = make_url(f"sqlite+pysqlite:///{path}")
        else:
            url = server_url_or_skip(dialect)
        _MIGRATED[dialect] = migrated(url)
    return _MIGRATED[dialect]


class _Template:
    """A migrated in-memory database, made at first use and kept open for the run."""

    keeper: sqlite3.Connection | None = None


_TEMPLATE = _Template()


def _memdb(name: str) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{name}?vfs=memdb", uri=True, check_same_thread=False)


def _template() -> sqlite3.Connection:
    if _TEMPLATE.keeper is None:
        name = f"/agentledger-template-{uuid.uuid4().hex}"
        keeper = _memdb(name)
        migrations.upgrade(f"sqlite:///file:{name}?vfs=memdb&uri=true")
        _TEMPLATE.keeper = keeper
    return _TEMPLATE.keeper


def memory_ledger(mode: str, **options: Any) -> Any:
    """``Ledger.in_memory(**options)`` (``mode`` "async": ``AsyncLedger.in_memory``), its
    database copied from a migrated template before first use: a store's migration
    (about 60 ms) is paid once per run, not once per test. Its first use then finds the
    schema at head, as a store migrated on first use would leave it."""
    ledger = AsyncLedger.in_memory(**options) if mode == "async" else Ledger.in_memory(**options)
    engine = ledger.engine.sync_engine if mode == "async" else ledger.engine
    target = _memdb(str(engine.url.database).removeprefix("file:"))
    try:
        _template().backup(target)
    finally:
        target.close()
    return ledger


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


def driver_params(dialect: str, drivers: list[str]) -> list[Any]:
    """``drivers`` of ``dialect`` (SQLAlchemy's names) as pytest params, each skipped
    when it is not installed (a fresh clone has only agentledger's own drivers), saying
    how to install it; under CI every driver is installed, and one missing fails."""
    params = []
    for driver in drivers:
        backend = by_driver(dialect, driver)
        missing = not IN_CI and not backend.installed()
        marks = pytest.mark.skipif(missing, reason=backend.missing())
        params.append(pytest.param(driver, id=driver, marks=marks))
    return params
