"""The backend registry: every database x driver the suite runs against.

A backend names a database and the driver each API uses on it; a backend without a
driver for one API does not run that mode (asyncpg has no sync twin, PyMySQL no async
one). Server backends read their URL from an environment variable:

    AGENTLEDGER_TEST_POSTGRES_URL=postgresql://postgres@127.0.0.1:5432/agentledger_test
    AGENTLEDGER_TEST_MYSQL_URL=mysql://root@127.0.0.1:3306/agentledger_test

Without it a laptop run skips that backend (saying how to enable it); with CI=true a
missing server fails the run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sqlalchemy.engine import URL, make_url

POSTGRES_ENV = "AGENTLEDGER_TEST_POSTGRES_URL"
MYSQL_ENV = "AGENTLEDGER_TEST_MYSQL_URL"


@dataclass(frozen=True)
class Backend:
    """One database x driver pair, with what it can take part in."""

    name: str
    dialect: str
    sync_driver: str | None
    async_driver: str | None
    server_env: str | None = None
    in_memory: bool = False
    multiprocess: bool = True
    """Whether separate processes can share it (not an in-memory database)."""

    @property
    def modes(self) -> tuple[str, ...]:
        return tuple(
            mode
            for mode, driver in (("sync", self.sync_driver), ("async", self.async_driver))
            if driver is not None
        )

    def server_url(self) -> URL | None:
        """The server URL from the environment, or None when it is not set."""
        if self.server_env is None:
            return None
        raw = os.environ.get(self.server_env)
        return make_url(raw) if raw else None

    def url_for(self, base: URL, mode: str) -> URL:
        """``base`` with this backend's driver for ``mode``."""
        driver = self.sync_driver if mode == "sync" else self.async_driver
        backend = base.get_backend_name()
        return base.set(drivername=f"{backend}+{driver}")


BACKENDS: tuple[Backend, ...] = (
    Backend("sqlite-file", "sqlite", "pysqlite", "aiosqlite"),
    Backend("sqlite-memory", "sqlite", "pysqlite", "aiosqlite", in_memory=True, multiprocess=False),
    Backend("postgresql-asyncpg", "postgresql", None, "asyncpg", server_env=POSTGRES_ENV),
    Backend(
        "postgresql-psycopg", "postgresql", "psycopg", "psycopg_async", server_env=POSTGRES_ENV
    ),
    Backend("mariadb-aiomysql", "mysql", None, "aiomysql", server_env=MYSQL_ENV),
    Backend("mariadb-pymysql", "mysql", "pymysql", None, server_env=MYSQL_ENV),
)


def by_name(name: str) -> Backend:
    return next(backend for backend in BACKENDS if backend.name == name)
