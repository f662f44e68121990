"""Engines: URLs and drivers, SQLite set-up, owned versus borrowed engines.

This is the engine set-up home of dialect differences:

- URL facts are read here and nowhere else: which database a URL names
  (``is_sqlite``), the file a SQLite URL names (``sqlite_file``) and whether two URLs
  name one database (``same_database``).
- A plain ``sqlite:///``, ``postgresql://`` or ``mysql://`` URL picks the driver that
  fits the API (pysqlite / aiosqlite, psycopg / asyncpg, PyMySQL / aiomysql), and a
  driver named for the other API is swapped for its twin.
- SQLite connections get WAL, a busy timeout and foreign keys on, and run with the
  driver's own transaction handling off, so that write units of work can begin with
  ``BEGIN IMMEDIATE`` (concurrent writers wait for the lock instead of failing at
  once with "database is locked") while reads stay deferred.
- ``in_memory()`` stores use SQLite's memdb VFS under a private name: every
  connection of the process sees the same database, with real locking. StaticPool
  or a shared cache would share one connection or block concurrent work.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import sqlite3
import sys
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Dialect, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry, PoolResetState

from ._translate import bad_url_as, missing_driver_as, sqlite_busy_ignored
from ._translate import mask as mask
from .errors import DatabaseError, SchemaError, ValidationError

DEFAULT_URL = "sqlite:///agentledger.db"
URL_ENV = "AGENTLEDGER_DATABASE_URL"
WRITE_OPTION = "agentledger_write"
"""Connection execution option: this transaction will write (SQLite: BEGIN IMMEDIATE)."""
ONE_STATEMENT_OPTION = "agentledger_one_statement"
"""Connection execution option: this read-only transaction is one statement (SQLite: no
BEGIN; in autocommit mode one statement is one read transaction, one snapshot)."""
ALONE_OPTION = "agentledger_alone"
"""Statement execution option: this statement is atomic by itself, and comes after
statements that wrote nothing, so on driver SQL in the driver's autocommit it runs as its
own transaction even as a call's second statement (``_driver.DriverConnection``)."""
SQLITE_BUSY_TIMEOUT_MS = 15_000
DEFAULT_LOCK_TIMEOUT_S = SQLITE_BUSY_TIMEOUT_MS / 1000
"""How long a ledger's statements wait for a lock by default, on every dialect."""

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
        raise ValidationError(
            f"unsupported database {backend!r} in {mask(parsed)}: agentledger runs on "
            "sqlite, postgresql and mysql/mariadb",
            path="url",
        )
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


def check_supported(engine: Engine) -> None:
    """Refuse an engine of a dialect agentledger does not run on, with DatabaseError
    naming it and the supported ones (before any SQL: its statements would fail)."""
    dialect = engine.dialect
    if dialect.name not in _SYNC_DRIVERS:
        raise DatabaseError(
            f"the {dialect.name} dialect ({dialect.driver}) is not supported: agentledger "
            "runs on sqlite, postgresql and mysql/mariadb"
        )


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
    if dialect_name != "postgresql":
        raise SchemaError(
            f"the schema option is only available on PostgreSQL, not on {dialect_name}: "
            "on SQLite and MySQL/MariaDB agentledger's tables live in the database the "
            "URL names (the table prefix agentledger_ keeps them apart)"
        )
    return schema


_CHECKED_RESET = ("sqlite", "mysql", "mariadb")
"""Backends whose pooled connections are rolled back on return only when their driver
says a transaction is still open (see ``_reset_if_in_transaction``)."""


def _engine_options(url: URL) -> dict[str, Any]:
    backend = url.get_backend_name()
    options: dict[str, Any] = {}
    if backend in _CHECKED_RESET:
        options["pool_reset_on_return"] = None
    if backend == "sqlite":
        return options
    if backend in ("mysql", "mariadb"):
        # Below MariaDB/MySQL's default wait_timeout (8 h), so idle connections are
        # replaced before the server drops them.
        options["pool_recycle"] = 3600
    return options


def _reset_if_in_transaction(
    dbapi_connection: Any, _record: ConnectionPoolEntry, state: PoolResetState
) -> None:
    """The pool's reset on return, done only when it has something to undo.

    A unit of work ends its own transaction, but SQLAlchemy's Session commits before it
    releases the connection, so the pool's default reset (a rollback) ran after every
    call anyway: one more worker-thread hop on aiosqlite, one more round trip on
    MariaDB/MySQL. The drivers know whether a transaction is open (sqlite3 and
    aiosqlite ``in_transaction``; PyMySQL and aiomysql the server's status flags from
    the last reply), so a connection returned mid-transaction (a raw connection left
    open, a failed commit) is still rolled back, and a clean one costs nothing. Errors
    here are the pool's to handle, as for its own reset (it invalidates the connection).
    """
    if dbapi_connection is None or state.terminate_only or not state.asyncio_safe:
        return
    if state.transaction_was_reset:
        return
    driver = getattr(dbapi_connection, "_connection", dbapi_connection)  # async adapters
    if hasattr(driver, "in_transaction"):
        open_ = bool(driver.in_transaction)
    else:
        status = getattr(driver, "server_status", None)
        open_ = not isinstance(status, int) or bool(status & _SERVER_STATUS_IN_TRANS)
    if open_:
        dbapi_connection.rollback()


_SERVER_STATUS_IN_TRANS = 1
"""MySQL protocol status flag: a transaction is open on this connection."""


def _configure_reset(engine: Engine, options: dict[str, Any]) -> None:
    """Check before resetting, unless the caller chose the pool's reset on return."""
    if engine.dialect.name in _CHECKED_RESET and "pool_reset_on_return" not in options:
        event.listen(engine, "reset", _reset_if_in_transaction)


IDLE_PING_S = 30.0
"""A pooled server connection idle longer than this is pinged before it is handed out."""
_CHECKED_IN_AT = "agentledger_checked_in_at"


def _note_checkin(_dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    record.info[_CHECKED_IN_AT] = time.monotonic()


class _PingIfIdle:
    """The pool's pre-ping, only for a connection idle longer than ``IDLE_PING_S``.

    ``pool_pre_ping`` pings at every checkout: on PostgreSQL a whole round trip
    (``BEGIN``, ``;``, ``ROLLBACK``) before each call's work. A connection used a moment
    ago is almost always alive; the one a server dropped (a restart, an idle timeout, a
    firewall) has usually been idle a while, and that one is still pinged. A dead ping
    invalidates the pool (every connection as old) and the pool connects anew. A
    connection that dies in between fails its first statement instead, before any
    COMMIT was sent: the ledger runs such a call again (``Ledger._perform``).
    """

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect

    def __call__(self, dbapi_connection: Any, record: ConnectionPoolEntry, _proxy: Any) -> None:
        checked_in = record.info.pop(_CHECKED_IN_AT, None)
        if checked_in is None or time.monotonic() - checked_in <= IDLE_PING_S:
            return
        dialect = self.dialect
        try:
            alive = dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as error:
            if not dialect.is_disconnect(error, dbapi_connection, None):
                raise
            alive = False
        if not alive:
            raise sa_exc.InvalidatePoolError()


def _configure_ping(engine: Engine, options: dict[str, Any]) -> None:
    """Ping idle server connections at checkout, unless the caller chose pre-ping."""
    if engine.dialect.name == "sqlite" or "pool_pre_ping" in options:
        return
    event.listen(engine, "checkin", _note_checkin)
    event.listen(engine, "checkout", _PingIfIdle(engine.dialect))


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
    PermissionDeniedError before any SQL (see ``is_read_only``).
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


def create_sync_engine(url: str | URL | None = None, **options: Any) -> Engine:
    """A sync Engine configured for agentledger (SQLite pragmas and BEGIN IMMEDIATE); a
    SQLite file this process cannot write is opened read-only (``read_only_sqlite``)."""
    resolved = read_only_sqlite(resolve_url(url, asynchronous=False))
    with missing_driver_as(lambda cause: _missing_driver(resolved, cause)):
        engine = create_engine(resolved, **{**_engine_options(resolved), **options})
    configure_sqlite_engine(engine)
    _configure_reset(engine, options)
    _configure_ping(engine, options)
    return engine


def create_async_engine_for(url: str | URL | None = None, **options: Any) -> AsyncEngine:
    """An AsyncEngine configured for agentledger (SQLite pragmas and BEGIN IMMEDIATE); a
    SQLite file this process cannot write is opened read-only (``read_only_sqlite``)."""
    resolved = read_only_sqlite(resolve_url(url, asynchronous=True))
    with missing_driver_as(lambda cause: _missing_driver(resolved, cause)):
        engine = create_async_engine(resolved, **{**_engine_options(resolved), **options})
    configure_sqlite_engine(engine.sync_engine)
    _configure_reset(engine.sync_engine, options)
    _configure_ping(engine.sync_engine, options)
    return engine


def create_sqlite_twin(engine: AsyncEngine) -> Engine | None:
    """A sync (pysqlite) engine on the SQLite file an aiosqlite engine a ledger created
    names, for the ledger-level calls of an ``AsyncLedger`` (one worker-thread hop per
    call, where aiosqlite hops per cursor call); None for anything else (an in-memory
    database, another dialect or driver).

    The twin connects to the same URL (a read-only file stays read-only) with the same
    connect-time set-up and pool reset (``configure_timeouts`` is the caller's, as for
    the engine). pysqlite pools a file's connections (QueuePool) with
    ``check_same_thread`` off, so each call may run in any thread of the pool.

    Its statement events are the engine's: the twin's dispatch is joined to
    ``engine.sync_engine``'s, as SQLAlchemy joins an ``Engine.execution_options()``
    copy to its parent (``OptionEngineMixin``), so the engine's ``begin`` listener
    (BEGIN IMMEDIATE) runs on the twin's connections, and what users listen for on
    ``ledger.engine.sync_engine`` (statement tracing) sees the twin's statements too,
    including listeners added later; a listener on the twin itself is the twin's
    only. Pool events (connect, checkout...) are each pool's own. That join is
    private API of SQLAlchemy (``_join``, ``_has_events``), used here only;
    tests/drivers/test_sqlite_twin.py fails if it changes.
    """
    sync_engine = engine.sync_engine
    url = sync_engine.url
    if url.get_backend_name() != "sqlite" or sync_engine.dialect.driver != "aiosqlite":
        return None
    if sqlite_file(url) is None and not is_read_only(url):
        return None
    twin_url = url.set(drivername="sqlite+pysqlite")
    with missing_driver_as(lambda cause: _missing_driver(twin_url, cause)):
        twin = create_engine(twin_url, **_engine_options(twin_url))
    event.listen(twin, "connect", _on_sqlite_connect)
    _configure_reset(twin, {})
    # Private SQLAlchemy API (see the docstring): the twin's statement events run the
    # parent's listeners too, as an OptionEngine's do.
    twin.dispatch = twin.dispatch._join(sync_engine.dispatch)
    # The parent has at least the ``begin`` listener; an engine without events skips
    # its dispatch, so this one must look (OptionEngineMixin reads its parent's flag).
    twin._has_events = True
    _twins.add(twin)
    return twin


_twins: weakref.WeakSet[Engine] = weakref.WeakSet()
"""The twins ``create_sqlite_twin`` made: configured through their parent's ``begin``."""


def configure_timeouts(
    engine: Engine, *, lock_timeout: float, statement_timeout: float | None
) -> None:
    """Set a lock timeout (seconds) and, when given, a statement timeout on every new
    connection of ``engine`` (an engine a ledger created).

    PostgreSQL: ``lock_timeout`` and ``statement_timeout``. MariaDB/MySQL:
    ``innodb_lock_wait_timeout`` (whole seconds, rounded up) and MariaDB's
    ``max_statement_time`` (MySQL: ``max_execution_time``, which bounds SELECTs only).
    SQLite: the busy timeout; it has no statement timeout (a statement there waits on
    nothing but the lock).
    """
    backend = engine.dialect.name
    lock_ms = max(1, round(lock_timeout * 1000))
    statement_ms = None if statement_timeout is None else max(1, round(statement_timeout * 1000))
    if backend == "sqlite":
        statements = [f"PRAGMA busy_timeout = {lock_ms}"]
    elif backend == "postgresql":
        statements = [f"SET lock_timeout = {lock_ms}"]
        if statement_ms is not None:
            statements.append(f"SET statement_timeout = {statement_ms}")
    else:
        statements = [f"SET SESSION innodb_lock_wait_timeout = {max(1, math.ceil(lock_timeout))}"]

    def on_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
        cursor = dbapi_connection.cursor()
        try:
            for statement in statements:
                cursor.execute(statement)
            if backend in ("mysql", "mariadb") and statement_ms is not None:
                cursor.execute("SELECT VERSION()")
                mariadb = "mariadb" in str(cursor.fetchone()[0]).lower()
                cursor.execute(
                    f"SET SESSION max_statement_time = {statement_ms / 1000:.3f}"
                    if mariadb
                    else f"SET SESSION max_execution_time = {statement_ms}"
                )
        finally:
            cursor.close()
        if backend != "sqlite":
            dbapi_connection.commit()  # PostgreSQL drivers began a transaction for the SETs

    event.listen(engine, "connect", on_connect)


def configure_sqlite_engine(engine: Engine | AsyncEngine) -> None:
    """Give a SQLite engine the set-up agentledger relies on; other engines are left alone.

    Call it on a SQLite engine you create and share with agentledger, sync or async
    (an AsyncEngine is set up through its ``sync_engine``): it turns the driver's own
    transaction handling off on each connection, sets WAL, a busy timeout and foreign
    keys, and makes transactions that will write begin with ``BEGIN IMMEDIATE``.
    Calling it twice is harmless.
    """
    if isinstance(engine, AsyncEngine):
        engine = engine.sync_engine
    if engine.dialect.name != "sqlite" or is_configured_sqlite(engine):
        return
    event.listen(engine, "connect", _on_sqlite_connect)
    event.listen(engine, "begin", _on_sqlite_begin)


def is_configured_sqlite(engine: Engine) -> bool:
    """Whether ``configure_sqlite_engine`` has been applied to ``engine`` (or to the
    engine a twin's events are joined to)."""
    return engine in _twins or event.contains(engine, "begin", _on_sqlite_begin)


def _on_sqlite_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
    # The driver's implicit BEGIN would be deferred and would skip DDL; we emit our own.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute("PRAGMA journal_mode")
        mode = str(cursor.fetchone()[0]).lower()
        if mode not in ("wal", "memory"):
            # SQLite refuses the switch at once, busy timeout or not, while another
            # connection writes or switches too (connections racing on a new file). The
            # file becomes WAL through that one or the next to connect; meanwhile this one
            # works in the current mode, its writes waiting on the busy timeout as usual.
            # A read-only file (see read_only_sqlite) keeps the mode it has.
            with sqlite_busy_ignored(readonly=True):
                cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = FULL")
    finally:
        cursor.close()


def _on_sqlite_begin(connection: Connection) -> None:
    options = connection.get_execution_options()
    writes = options.get(WRITE_OPTION, False)
    if not writes and options.get(ONE_STATEMENT_OPTION, False):
        return  # the driver's autocommit: the statement is its own read transaction
    connection.exec_driver_sql(_sqlite_begin(writes))


def _sqlite_begin(writes: bool) -> str:
    # A writer takes the write lock first: one that read first and then upgraded could
    # fail at once (SQLITE_BUSY) against another writer, whatever the busy timeout.
    return "BEGIN IMMEDIATE" if writes else "BEGIN"


def takes_driver_sql(dialect: Dialect) -> bool:
    """Whether ``_driver`` runs on this dialect: SQLite and PostgreSQL, whose LangGraph
    reads are one statement each (``repositories._statements.json_object_entries``). MariaDB/MySQL's
    take two, the second with an expanding IN that cannot be compiled once."""
    return dialect.name in ("sqlite", "postgresql")


def driver_one_statement(dialect: Dialect, read_options: dict[str, Any], *, writes: bool) -> bool:
    """Whether a driver SQL call runs as one statement in the driver's autocommit, with
    no BEGIN and COMMIT (``_driver.transaction``). PostgreSQL where the ledger's reads
    are AUTOCOMMIT (``read_only_options``), writes too (their one statement is atomic by
    itself). SQLite's reads: its connections are in the driver's autocommit already
    (``configure_sqlite_engine``), and one statement there is its own read transaction,
    one snapshot, as SQLAlchemy's reads of one statement run (``ONE_STATEMENT_OPTION``);
    its BEGIN and COMMIT were a third of a ``get_tuple``'s SQLite calls."""
    if dialect.name == "sqlite":
        return not writes
    return read_options.get("isolation_level") == "AUTOCOMMIT"


def driver_begin_sql(dialect: Dialect, *, writes: bool) -> str | None:
    """The SQL that begins a transaction on a driver connection of this dialect, as
    SQLAlchemy's transactions begin here: SQLite's connections are in the driver's
    autocommit (``configure_sqlite_engine``), so its ``BEGIN`` (``IMMEDIATE`` for a
    write) is sent explicitly. None elsewhere: the driver begins at the first
    statement."""
    return _sqlite_begin(writes) if dialect.name == "sqlite" else None


def driver_cursor(dbapi_connection: Any, dialect: Dialect) -> Any:
    """A cursor for driver SQL. Sync psycopg's in its binary format, as LangGraph's
    PostgresSaver uses: in text, bytes travel as hex, twice their size, and are decoded
    again (a 70 KB channel value: a fifth of a read's time). psycopg's async adapter
    takes no format."""
    if dialect.driver == "psycopg" and not dialect.is_async:
        return dbapi_connection.cursor(binary=True)
    return dbapi_connection.cursor()


def driver_autocommit(dbapi_connection: Any, dialect: Dialect, enabled: bool) -> None:
    """Switch a driver SQL connection into the driver's autocommit and back (a block of
    one statement, ``_driver.transaction``). Sync psycopg: its ``autocommit`` alone,
    which leaves the connection's isolation level as it was; SQLAlchemy's switch to
    ``AUTOCOMMIT`` also clears the isolation level and its reset sets it again, four
    driver calls (3.3% of a ``get_tuple``, sampled, against 1.8%). Elsewhere, SQLAlchemy's."""
    if dialect.name == "sqlite":
        return  # always in the driver's autocommit (``configure_sqlite_engine``)
    if dialect.driver == "psycopg" and not dialect.is_async:
        dbapi_connection.autocommit = enabled
    elif enabled:
        dialect.set_isolation_level(dbapi_connection, "AUTOCOMMIT")
    else:
        dialect.reset_isolation_level(dbapi_connection)


def driver_begin_after_first(dbapi_connection: Any, dialect: Dialect) -> bool:
    """Begin a transaction on a driver SQL connection in the driver's autocommit after
    its first statement (which wrote nothing: ``_driver.transaction``), for the rest of
    the block; whether it could. PostgreSQL: the driver is switched out of autocommit,
    and begins at the next statement; at READ COMMITTED the first statement's snapshot
    was its own anyway. Not on SQLite, where a read's statements share one snapshot
    only inside its transaction: the first would be outside it."""
    if dialect.name == "sqlite":
        return False
    driver_autocommit(dbapi_connection, dialect, False)
    return True


def driver_execute_options(dialect: Dialect) -> dict[str, Any]:
    """Keyword arguments of a driver SQL ``cursor.execute``. Sync psycopg: prepare each
    statement on its first run, as PostgresSaver does (``prepare_threshold=0``), rather
    than after psycopg's default five: driver SQL runs a handful of prebuilt statements,
    and unprepared, a put's CTEs are parsed and planned again on every run (a fresh
    connection's first puts took 1.0 ms against 0.65 ms once prepared). psycopg ignores
    it where preparing is off (``prepare_threshold=None``: ``pgbouncer_engine_options``)."""
    if dialect.driver == "psycopg" and not dialect.is_async:
        return {"prepare": True}
    return {}


def read_only_options(connection: Connection) -> dict[str, Any]:
    """Extra connection options for a ledger's read-only calls on this database.

    PostgreSQL at READ COMMITTED (its default): AUTOCOMMIT. Otherwise asyncpg and
    psycopg send BEGIN before the first SELECT and the unit of work ends with a
    COMMIT: two more round trips around a read of one or two statements. At READ
    COMMITTED each statement takes its own snapshot anyway, so a read that runs its
    statements outside a transaction sees exactly what it would inside one, and both
    drivers switch AUTOCOMMIT on and off on the client, with no round trip. An engine
    set to REPEATABLE READ or SERIALIZABLE keeps its transactions, and so does asyncpg
    set up for a transaction-mode pooler (SQLAlchemy's statement cache off, as
    ``pgbouncer_engine_options`` does): asyncpg prepares and then executes a statement
    in two exchanges, which such a pooler sends to one server connection only inside a
    transaction. On MariaDB/MySQL the switch itself is a round trip (``SET
    autocommit``), and SQLite reads need their BEGIN for one snapshot: both keep theirs.
    """
    if connection.dialect.name != "postgresql":
        return {}
    adapted: Any = connection.connection.dbapi_connection
    if hasattr(adapted, "_prepared_statement_cache") and adapted._prepared_statement_cache is None:
        return {}
    levels = {connection.default_isolation_level, connection.get_isolation_level()}
    return {"isolation_level": "AUTOCOMMIT"} if levels == {"READ COMMITTED"} else {}


def check_borrowed_sqlite(connection: Connection) -> None:
    """Refuse a borrowed SQLite engine whose connections would break agentledger.

    Foreign keys off means deleting a session leaves its messages behind, so it is
    refused; the rest (WAL, BEGIN IMMEDIATE) only costs concurrency and is allowed.
    """
    if connection.dialect.name != "sqlite" or is_configured_sqlite(connection.engine):
        return
    enabled = connection.exec_driver_sql("PRAGMA foreign_keys").scalar()
    if not enabled:
        raise SchemaError(
            "this SQLite engine has foreign keys switched off, so deleting a session "
            "would leave its rows behind",
            hint="call agentledger.configure_sqlite_engine(engine) right after "
            "create_engine(), or run PRAGMA foreign_keys=ON on every connection",
        )


@contextmanager
def brief_transaction(connection: Connection, *, commit: bool = False) -> Iterator[None]:
    """Run a block in the caller's open transaction, else in a brief one of its own.

    The statements of a block on a connection with no transaction open autobegin one;
    it ends with the block, committed when ``commit`` (DDL, a session-level lock) and
    rolled back otherwise (a read) or on failure. The connection is then left as the
    caller had it: Alembic commits per migration only in a transaction it began, and a
    SQLite migration needs none open. An open transaction stays the caller's.
    """
    began = not connection.in_transaction()
    try:
        yield
    except BaseException:
        if began and connection.in_transaction():
            connection.rollback()
        raise
    if began and connection.in_transaction():
        if commit:
            connection.commit()
        else:
            connection.rollback()


@contextmanager
def sqlite_migration_connection(connection: Connection) -> Iterator[Connection]:
    """Prepare a SQLite connection for a migration run and hold its write lock.

    Alembic's batch mode rebuilds a table by copy, drop and rename; with foreign keys
    on, the drop would cascade-delete every child row. Foreign keys go off (checked,
    since the PRAGMA is a silent no-op inside a transaction), the run is one
    ``BEGIN IMMEDIATE`` transaction (the lock that serialises concurrent upgrades),
    ``foreign_key_check`` runs before the commit, and everything is restored after.
    """
    if connection.in_transaction():
        raise SchemaError(
            "a SQLite migration needs a connection outside a transaction (foreign keys "
            "cannot be switched off inside one)"
        )
    dbapi = connection.connection.dbapi_connection
    assert dbapi is not None
    saved_isolation = dbapi.isolation_level
    dbapi.isolation_level = None
    cursor = dbapi.cursor()
    cursor.execute("PRAGMA foreign_keys")
    saved_foreign_keys = tuple(cursor.fetchone() or ()) == (1,)
    try:
        cursor.execute("PRAGMA foreign_keys = OFF")
        cursor.execute("PRAGMA foreign_keys")
        if tuple(cursor.fetchone() or ()) != (0,):
            raise SchemaError("could not switch SQLite foreign keys off for the migration")
        with connection.execution_options(**{WRITE_OPTION: True}).begin():
            if not is_configured_sqlite(connection.engine):
                connection.exec_driver_sql("BEGIN IMMEDIATE")
            yield connection
            problems = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
            if problems:
                raise SchemaError(f"the migration left rows with broken foreign keys: {problems}")
    finally:
        cursor.execute(f"PRAGMA foreign_keys = {'ON' if saved_foreign_keys else 'OFF'}")
        cursor.close()
        dbapi.isolation_level = saved_isolation


class MemoryDatabase:
    """A private in-process SQLite database (memdb VFS), kept alive while open.

    A memdb database lives as long as one connection to it is open; this object holds
    that connection, so pool churn never loses the data.
    """

    def __init__(self) -> None:
        # secrets, not uuid.uuid4: an application's tests may patch uuid4 to make
        # their own ids predictable (LangGraph's do), and a store must not take one.
        self.name = f"/agentledger-{secrets.token_hex(16)}"
        self._keeper: sqlite3.Connection | None = sqlite3.connect(
            self.uri, uri=True, check_same_thread=False
        )

    @property
    def uri(self) -> str:
        """The SQLite URI of the database, for sqlite3.connect(uri=True)."""
        return f"file:{self.name}?vfs=memdb"

    def url(self, *, asynchronous: bool) -> URL:
        """The SQLAlchemy URL of the database for the sync or async API."""
        driver = "aiosqlite" if asynchronous else "pysqlite"
        return make_url(f"sqlite+{driver}:///file:{self.name}?vfs=memdb&uri=true")

    def close(self) -> None:
        """Let the database go once the last engine connection closes."""
        if self._keeper is not None:
            self._keeper.close()
            self._keeper = None


def pgbouncer_engine_options(*, asynchronous: bool) -> dict[str, Any]:
    """Engine keyword arguments for PostgreSQL behind pgbouncer in transaction mode.

    A transaction-mode pooler hands each transaction to any server connection, so
    prepared statements (which live on one server connection) break: asyncpg's
    statement cache gives "prepared statement ... does not exist", psycopg prepares
    a statement after 5 runs. These options turn both off, and name any statement
    asyncpg must still prepare uniquely::

        engine = create_async_engine(url, **pgbouncer_engine_options(asynchronous=True))
        ledger = AsyncLedger(engine=engine)
    """
    if asynchronous:
        return {
            "connect_args": {
                "statement_cache_size": 0,  # asyncpg's own cache
                "prepared_statement_cache_size": 0,  # SQLAlchemy's adapter cache
                "prepared_statement_name_func": lambda: f"__agentledger_{secrets.token_hex(16)}__",
            }
        }
    return {"connect_args": {"prepare_threshold": None}}


def repair_aiomysql_bytes(dialect: Dialect) -> None:
    """Make aiomysql send bytes parameters again (LangGraph's values are bytes).

    aiomysql 0.3 escapes bytes with PyMySQL's ``escape_bytes_prefixed``, which PyMySQL
    1.1.1 replaced by a placeholder string kept only so that aiomysql still imports
    (PyMySQL issue 1274): every bytes parameter then fails with ``TypeError: 'str' object
    is not callable``. This puts back the function PyMySQL had, on first use of an
    aiomysql engine; other drivers are left alone.
    """
    # The dialect imported aiomysql when it loaded its DBAPI: nothing to import here.
    module = sys.modules.get("aiomysql.connection") if dialect.driver == "aiomysql" else None
    if module is not None and isinstance(getattr(module, "escape_bytes_prefixed", None), str):
        module.escape_bytes_prefixed = _escape_bytes_prefixed  # type: ignore[attr-defined]


def _escape_bytes_prefixed(value: bytes) -> str:
    return f"_binary X'{value.hex()}'"
