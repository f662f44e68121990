"""URLs and drivers: which database a URL names, and the driver each API uses there.

URL facts are read here and nowhere else: which database a URL names (``is_sqlite``),
the file a SQLite URL names (``sqlite_file``), whether two URLs name one database
(``same_database``) and whether a SQLite file is opened read-only (``read_only_sqlite``,
``is_read_only``). A plain ``sqlite:///``, ``postgresql://`` or ``mysql://`` URL picks
the driver that fits the API (pysqlite / aiosqlite, psycopg / asyncpg, PyMySQL /
aiomysql), and a driver named for the other API is swapped for its twin. It imports
nothing else of ``engine``: every other module of it reads URLs through this one.
"""

from __future__ import annotations

import logging
import os
import re
import weakref

from sqlalchemy import Engine
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import NoSuchModuleError

from .._translate import bad_url_as
from .._translate import mask as mask
from ..environment import DATABASE_URL
from ..environment import DEFAULT_URL as DEFAULT_URL
from ..errors import DatabaseError, SchemaError, ValidationError

URL_ENV = DATABASE_URL.name
logger = logging.getLogger("agentledger.engine")

_SYNC_DRIVERS = {
    "sqlite": "pysqlite",
    "postgresql": "psycopg",
    "mysql": "pymysql",
    "mariadb": "pymysql",
}
_ASYNC_DRIVERS = {
    "sqlite": "aiosqlite",
    "postgresql": "asyncpg",
    "mysql": "aiomysql",
    "mariadb": "aiomysql",
}
_TO_ASYNC = {
    "pysqlite": "aiosqlite",
    "psycopg": "psycopg_async",
    "psycopg2": "asyncpg",
    "pg8000": "asyncpg",
    "pymysql": "aiomysql",
    "mysqldb": "aiomysql",
    "mysqlconnector": "aiomysql",
}
_TO_SYNC = {
    "aiosqlite": "pysqlite",
    "asyncpg": "psycopg",
    "psycopg_async": "psycopg",
    "aiomysql": "pymysql",
    "asyncmy": "pymysql",
}
_EXTRAS = {"postgresql": "postgres", "mysql": "mysql", "mariadb": "mysql"}
_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def resolve_url(url: str | URL | None, *, asynchronous: bool) -> URL:
    """The URL to connect to, with the driver that fits the sync or async API.

    ``None`` means ``AGENTLEDGER_DATABASE_URL``, else ``sqlite:///agentledger.db``.
    """
    if url is None:
        url = os.environ.get(URL_ENV) or DEFAULT_URL
    not_a_url = ValidationError(
        f"not a database URL: {mask(url)!s}; expected something like "
        "sqlite:///agentledger.db or postgresql://user@host/db",
        path="url",
    )
    with bad_url_as(lambda: not_a_url):
        parsed = url if isinstance(url, URL) else make_url(url)
    backend = parsed.get_backend_name()
    if backend == "postgres":
        backend = "postgresql"
    if backend not in _SYNC_DRIVERS:
        return _untested(parsed, backend)
    charset = parsed.query.get("charset")
    if backend in ("mysql", "mariadb") and charset is not None and charset != "utf8mb4":
        # Any other character set cannot hold every character agentledger stores (and
        # PyMySQL fails on an unknown one with an AttributeError).
        raise ValidationError(
            f"charset={charset!s} in {mask(parsed)}: agentledger stores any Unicode text, "
            "which needs charset=utf8mb4 (the default: leave it out)",
            path="url",
        )
    driver = parsed.drivername.partition("+")[2]
    if not driver:
        driver = (_ASYNC_DRIVERS if asynchronous else _SYNC_DRIVERS)[backend]
    elif asynchronous:
        driver = _TO_ASYNC.get(driver, driver)
    else:
        driver = _TO_SYNC.get(driver, driver)
    return parsed.set(drivername=f"{backend}+{driver}")


_TYPED: weakref.WeakKeyDictionary[Engine, str | URL] = weakref.WeakKeyDictionary()
"""The URL each engine agentledger created was given, as the caller wrote it."""


def remember_typed_url(engine: Engine, url: str | URL | None) -> None:
    """Record the URL ``engine`` was made from as the caller wrote it (None: the
    environment's, else the default), for ``typed_url``."""
    _TYPED[engine] = url if url is not None else (os.environ.get(URL_ENV) or DEFAULT_URL)


def typed_url(engine: Engine) -> str | URL:
    """The URL ``engine`` was made from as the caller wrote it (``postgresql://``, not the
    ``postgresql+psycopg://`` it resolved to), for hints that name a command to run;
    for an engine agentledger did not create, its own URL."""
    return _TYPED.get(engine, engine.url)


def _untested(parsed: URL, backend: str) -> URL:
    """A URL of a dialect agentledger was not tested on, as written: its driver is the
    one the URL names, else SQLAlchemy's default for the dialect. A name SQLAlchemy has
    no dialect for is refused here, before any driver is looked for."""
    try:
        parsed.get_dialect()
    except NoSuchModuleError:
        raise ValidationError(
            f"unsupported database {backend!r} in {mask(parsed)}: SQLAlchemy has no dialect "
            "of that name (agentledger runs on sqlite, postgresql and mysql/mariadb, and "
            "untested on any other dialect SQLAlchemy can load)",
            path="url",
        ) from None
    except ImportError:
        pass  # the dialect is there and its driver is not: said when the engine is made
    return parsed


UNTESTED = (
    "it was not tested there, and runs on the portable profile (no dialect-specific "
    "statement) after its capability probe; not tested: concurrent upgraders (no "
    "migration lock: run `agentledger db upgrade` from one process), the lock and "
    "statement timeouts (not set: the database's own apply; asked for, refused), which "
    "errors are retried "
    "(only the error codes of docs/dialects.md are classified)"
)
"""What a ledger on an untested dialect is warned of (``check_supported``)."""
_WARNED: set[str] = set()


def check_supported(engine: Engine) -> None:
    """Warn, once per dialect and process, that ``engine``'s dialect is not one
    agentledger was tested on (``UNTESTED``); its probe then checks what it needs."""
    dialect = engine.dialect
    if dialect.name in _SYNC_DRIVERS or dialect.name in _WARNED:
        return
    _WARNED.add(dialect.name)
    logger.warning("agentledger on the %s dialect (%s): %s", dialect.name, dialect.driver, UNTESTED)


def is_sqlite(url: str | URL) -> bool:
    """Whether the URL names a SQLite database (a file, in-memory or a ``file:`` URI)."""
    return resolve_url(url, asynchronous=False).get_backend_name() == "sqlite"


def sqlite_file(url: str | URL) -> str | None:
    """The path of the file a SQLite URL names, as written in the URL; else None.

    None for another database, for a private in-memory one (``sqlite://``,
    ``sqlite:///:memory:``) and for a ``file:`` URI, whose path and options (a memdb
    VFS, ``mode=memory``) SQLite reads itself. A path that is not None is where
    connecting creates the file when it does not exist.
    """
    if not is_sqlite(url):
        return None
    database = resolve_url(url, asynchronous=False).database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return None
    return database


def same_database(first: str | URL, second: str | URL) -> bool:
    """Whether two URLs name one database, whatever their drivers.

    SQLite files are compared by their real paths (``./a.db`` and ``/tmp/../tmp/a.db``
    can be one file); ``file:`` URIs by their text; a private in-memory database is
    never the same as another. Servers are compared by host, port and database name
    (a PostgreSQL schema is the caller's to compare).
    """
    a, b = resolve_url(first, asynchronous=False), resolve_url(second, asynchronous=False)
    if a.get_backend_name() != b.get_backend_name():
        return False
    if not is_sqlite(a):
        return (a.host, a.port, a.database) == (b.host, b.port, b.database)
    files = sqlite_file(a), sqlite_file(b)
    if files[0] is not None and files[1] is not None:
        return os.path.realpath(files[0]) == os.path.realpath(files[1])
    return a.database == b.database and (a.database or "") not in ("", ":memory:")


def takes_schema(dialect_name: str) -> bool:
    """Whether agentledger's tables can live in a schema of their own there (PostgreSQL):
    elsewhere they live in the database the URL names."""
    return dialect_name == "postgresql"


def validate_schema(schema: str | None, dialect_name: str) -> str | None:
    """Check the PostgreSQL schema option: an identifier, and only on PostgreSQL."""
    if schema is None:
        return None
    if not isinstance(schema, str) or _SCHEMA_NAME.fullmatch(schema) is None:
        raise ValidationError(
            f"invalid schema name {schema!r}: use a letter or '_' then up to 62 letters, "
            "digits or '_'",
            path="schema",
        )
    if not takes_schema(dialect_name):
        raise SchemaError(
            f"the schema option is only available on PostgreSQL, not on {dialect_name}: "
            "on SQLite and MySQL/MariaDB agentledger's tables live in the database the "
            "URL names (the table prefix agentledger_ keeps them apart)"
        )
    return schema


def _missing_driver(url: URL, exc: Exception) -> DatabaseError:
    extra = _EXTRAS.get(url.get_backend_name())
    hint = f"pip install 'agentledger[{extra}]'" if extra else "install the driver"
    return DatabaseError(f"the driver for {mask(url)} is not installed ({exc}); {hint}")


def read_only_sqlite(url: URL) -> URL:
    """``url``, or for an existing SQLite file this process cannot write (a read-only
    file, folder or mount) the same file opened read-only: a URI with ``mode=ro``, and
    ``immutable=1`` when the folder cannot take the ``-shm`` file WAL reads need (and
    no ``-wal`` file holds changes a reader must see).

    Reads then work (listing, export, ``db check``); a write raises
    ReadOnlyDatabaseError before any SQL (see ``is_read_only``).
    """
    path = sqlite_file(url)
    if path is None or not os.path.isfile(path):
        return url
    path = os.path.abspath(path)
    folder_writable = os.access(os.path.dirname(path), os.W_OK)
    if folder_writable and os.access(path, os.W_OK):
        return url
    query = {**url.query, "mode": "ro", "uri": "true"}
    if not folder_writable and not os.path.exists(path + "-wal"):
        query["immutable"] = "1"
    return url.set(database=f"file:{path}", query=query)


def is_read_only(url: URL) -> bool:
    """Whether ``url`` is a SQLite file opened read-only (``read_only_sqlite``)."""
    return url.get_backend_name() == "sqlite" and url.query.get("mode") == "ro"
