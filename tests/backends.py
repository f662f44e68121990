"""The backend registry (every database x driver the suite runs against) and the test
tiers (on which of them each test runs).

A backend names a database and the driver each API uses on it; a backend without a
driver for one API does not run that mode (asyncpg has no sync twin, PyMySQL no async
one). A *target* is a backend and the API (mode) a test drives it through. The store
fixtures (``harness``, ``saved``, ``store``...) run on the targets of the test's tier,
declared with ``agentledger.testing.tier`` on the test or its class:

=========  ==============================================================  ===========
tier       targets                                                         item marker
=========  ==============================================================  ===========
logic      one: the in-memory store, sync (a SQLite file where the test    (none)
           needs one other processes can open)
dialect    one per database: SQLite file, PostgreSQL, MariaDB; the driver  ``dialect``
           and API rotate over the tests (a stable hash of the test's
           name), so each driver carries a share of the tier
driver     every contract backend x mode (9 with every server)            ``driver``
=========  ==============================================================  ===========

The default is ``dialect``. A test that drives one API only says so with
``@pytest.mark.api("sync")`` (its targets are then of that API), rather than skipping
on the other, which a rotation could pick every time; ``@pytest.mark.databases(...)``
keeps a test to the databases it names. ``slow`` marks tests that take
seconds (processes, wheels, servers, browsers, benchmarks end to end) whatever their
tier. ``python3 dev.py test``
runs everything; ``python3 dev.py test --fast`` leaves out ``driver`` and ``slow``.

The contract suite runs on the backends of the drivers agentledger picks itself; the
driver smoke scenario (tests/drivers/test_drivers.py) runs on every server backend, so every
driver SQLAlchemy offers for these databases is tried. Where a server backend's
database is, tests/databases.py says (``server_url``): the URL in its environment
variable, else for PostgreSQL a private server of the run.
"""

from __future__ import annotations

import importlib.util
import zlib
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy.engine import URL

from agentledger.testing import Tier, tier_of

POSTGRES_ENV = "AGENTLEDGER_TEST_POSTGRES_URL"
MYSQL_ENV = "AGENTLEDGER_TEST_MYSQL_URL"


BUILDS_AGAINST = {
    "mysqlclient": "it builds against libmariadb: apt-get install libmariadb-dev pkg-config"
}
"""What a driver needs installed beside it to build, said only in its own skip line."""


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
        """Whether the driver is importable (agentledger's own drivers always are).

        ``find_spec`` of a dotted name imports its parent, which raises when the parent
        is missing (``mysql.connector`` without ``mysql``): that is not installed too.
        """
        if self.package is None:
            return True
        try:
            return importlib.util.find_spec(self.module or self.package) is not None
        except ImportError:
            return False

    def missing(self) -> str:
        """The skip reason when the driver is not installed, and how to install it."""
        needs = BUILDS_AGAINST.get(str(self.package))
        return f"the {self.package} driver is not installed: python3 dev.py setup drivers" + (
            f" ({needs})" if needs else ""
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


def by_driver(dialect: str, driver: str) -> Backend:
    """The backend of ``driver`` (SQLAlchemy's name: ``psycopg2``, ``asyncpg``...) on
    ``dialect``."""
    return next(
        backend
        for backend in BACKENDS
        if backend.dialect == dialect and driver in (backend.sync_driver, backend.async_driver)
    )


def by_name(name: str) -> Backend:
    return next(backend for backend in BACKENDS if backend.name == name)


DIALECT_MARKS = {
    "sqlite": pytest.mark.sqlite,
    "postgresql": pytest.mark.postgresql,
    "mysql": pytest.mark.mysql,
}
"""The marker of the tests that need each database (``-m 'not mysql'`` and so on)."""
MODES = ("sync", "async")


@dataclass(frozen=True)
class Target:
    """A backend and the API a test drives it through."""

    backend: Backend
    mode: str

    @property
    def name(self) -> str:
        return f"{self.backend.name}-{self.mode}"

    @property
    def dialect(self) -> str:
        return self.backend.dialect

    def url_for(self, base: URL) -> URL:
        """``base`` with this target's driver."""
        return self.backend.url_for(base, self.mode)


def targets(
    tier: Tier,
    *,
    modes: tuple[str, ...] = MODES,
    shared: bool = False,
    databases: tuple[str, ...] = tuple(DIALECT_MARKS),
    rotation: str = "",
) -> list[Target]:
    """The targets a test of ``tier`` runs on, among the contract backends' ``modes``
    on ``databases``; ``shared``: only databases other processes can open too (no
    in-memory store). ``rotation`` (the test's name) picks a dialect-tier test's driver
    and API."""
    candidates = [
        Target(backend, mode)
        for backend in BACKENDS
        if backend.contract
        and backend.dialect in databases
        and (backend.multiprocess or not shared)
        for mode in backend.modes
        if mode in modes
    ]
    if tier == "driver":
        return candidates
    if tier == "logic":
        preferred = sorted(
            (target for target in candidates if target.dialect == "sqlite"),
            key=lambda target: (not target.backend.in_memory, target.mode != "sync"),
        )
        return preferred[:1]
    chosen = []
    key = zlib.crc32(rotation.encode())
    for dialect in DIALECT_MARKS:
        options = [t for t in candidates if t.dialect == dialect and not t.backend.in_memory]
        options = options or [t for t in candidates if t.dialect == dialect]
        if options:
            chosen.append(options[key % len(options)])
    return chosen


def target_params(tier: Tier, **options: Any) -> list[Any]:
    """``pytest.param`` per target of ``targets(tier, **options)``, marked with its
    database and tier."""
    tier_marks = [getattr(pytest.mark, tier)] if tier != "logic" else []
    return [
        pytest.param(target, id=target.name, marks=[DIALECT_MARKS[target.dialect], *tier_marks])
        for target in targets(tier, **options)
    ]


def parametrize_targets(
    metafunc: pytest.Metafunc,
    fixture: str,
    *,
    modes: tuple[str, ...] = MODES,
    shared: bool = False,
) -> None:
    """From a ``pytest_generate_tests`` hook: run ``fixture`` (which reads a ``Target``
    from ``request.param``) on the targets of the test's tier, of the APIs its ``api``
    marker names and the databases its ``databases`` marker names, if it has them."""
    if fixture not in metafunc.fixturenames or fixture in vars(metafunc.module):
        return  # not this fixture, or the module's own
    options: dict[str, Any] = {"modes": modes, "shared": shared}
    api = metafunc.definition.get_closest_marker("api")
    if api is not None:
        options["modes"] = tuple(mode for mode in modes if mode in api.args)
    databases = metafunc.definition.get_closest_marker("databases")
    if databases is not None:
        options["databases"] = databases.args
    tier = tier_of(metafunc.function, metafunc.cls)
    rotation = f"{metafunc.module.__name__}::{metafunc.function.__qualname__}"
    params = target_params(tier, rotation=rotation, **options)
    metafunc.parametrize(fixture, params, indirect=True)
