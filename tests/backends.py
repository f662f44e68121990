"""The backend registry: every database x driver the suite runs against.

A backend names a database and the driver each API uses on it; a backend without a
driver for one API does not run that mode (asyncpg has no sync twin, PyMySQL no async
one). The contract suite runs on the backends of the drivers agentledger picks itself;
the driver smoke scenario (tests/test_drivers.py) runs on every server backend, so
every driver SQLAlchemy offers for these databases is tried. Where a server backend's
database is, tests/databases.py says (``server_url``): the URL in its environment
variable, else for PostgreSQL a private server of the run.
"""

from __future__ import annotations

import importlib.util
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
    contract: bool = True
    """Whether the contract suite runs on it (else only the driver smoke scenario)."""
    package: str | None = None
    """The pip package of a driver that does not come with agentledger's extras."""
    module: str | None = None
    """The module that package installs, when its name differs from the package's."""

    @property
    def modes(self) -> tuple[str, ...]:
        return tuple(
            mode
            for mode, driver in (("sync", self.sync_driver), ("async", self.async_driver))
            if driver is not None
        )

    def installed(self) -> bool:
        """Whether the driver is importable (agentledger's own drivers always are)."""
        if self.package is None:
            return True
        return importlib.util.find_spec(self.module or self.package) is not None

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
    # The drivers of the `drivers` extra: the smoke scenario only.
    Backend("postgresql-pg8000", "postgresql", "pg8000", None, contract=False, package="pg8000"),
    Backend(
        "postgresql-psycopg2",
        "postgresql",
        "psycopg2",
        None,
        contract=False,
        package="psycopg2-binary",
        module="psycopg2",
    ),
    Backend(
        "mariadb-mysqlconnector",
        "mysql",
        "mysqlconnector",
        None,
        contract=False,
        package="mysql-connector-python",
        module="mysql.connector",
    ),
    Backend(
        "mariadb-mysqlclient",
        "mysql",
        "mysqldb",
        None,
        contract=False,
        package="mysqlclient",
        module="MySQLdb",
    ),
    Backend("mariadb-asyncmy", "mysql", None, "asyncmy", contract=False, package="asyncmy"),
)


def by_name(name: str) -> Backend:
    return next(backend for backend in BACKENDS if backend.name == name)
