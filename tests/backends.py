"""The backend registry: every database x driver the suite runs against.

A backend names a database and the driver each API uses on it; a backend without a
driver for one API does not run that mode (asyncpg has no sync twin, PyMySQL no async
one). Where a server backend's database is, tests/databases.py says (``server_url``):
the URL in its environment variable, else for PostgreSQL a private server of the run.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import URL

POSTGRES_ENV = "AGENTLEDGER_TEST_POSTGRES_URL"
MYSQL_ENV = "AGENTLEDGER_TEST_MYSQL_URL"


@dataclass(frozen=True)
class Backend:
    """One database x driver pair, with what it can take part in."""

    name: str
    dialect: str
    sync_driver: str | None
    async_driver: str | None
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

    def url_for(self, base: URL, mode: str) -> URL:
        """``base`` with this backend's driver for ``mode``."""
        driver = self.sync_driver if mode == "sync" else self.async_driver
        backend = base.get_backend_name()
        return base.set(drivername=f"{backend}+{driver}")


BACKENDS: tuple[Backend, ...] = (
    Backend("sqlite-file", "sqlite", "pysqlite", "aiosqlite"),
    Backend("sqlite-memory", "sqlite", "pysqlite", "aiosqlite", in_memory=True, multiprocess=False),
    Backend("postgresql-asyncpg", "postgresql", None, "asyncpg"),
    Backend("postgresql-psycopg", "postgresql", "psycopg", "psycopg_async"),
    Backend("mariadb-aiomysql", "mysql", None, "aiomysql"),
    Backend("mariadb-pymysql", "mysql", "pymysql", None),
)


def by_name(name: str) -> Backend:
    return next(backend for backend in BACKENDS if backend.name == name)
