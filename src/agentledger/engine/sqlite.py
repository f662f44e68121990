"""SQLite set-up: the connection pragmas, BEGIN IMMEDIATE, borrowed and twin engines,
migrations, in-memory databases.

SQLite connections get WAL, a busy timeout and foreign keys on, and run with the
driver's own transaction handling off, so that write units of work can begin with
``BEGIN IMMEDIATE`` (concurrent writers wait for the lock instead of failing at once
with "database is locked") while reads stay deferred. ``in_memory()`` stores use
SQLite's memdb VFS under a private name: every connection of the process sees the same
database, with real locking. StaticPool or a shared cache would share one connection or
block concurrent work. Which database a URL names is ``urls``'s and how connections are
pooled is ``pool``'s: this module is what agentledger does on a SQLite connection.
"""

from __future__ import annotations

import secrets
import sqlite3
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import ConnectionPoolEntry

from .._translate import missing_driver_as, sqlite_busy_ignored
from ..errors import SchemaError
from .pool import SQLITE_BUSY_TIMEOUT_MS, _configure_reset, _engine_options
from .transactions import ONE_STATEMENT_OPTION, WRITE_OPTION
from .urls import _missing_driver, is_read_only, remember_typed_url, sqlite_file, typed_url


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
    engine a twin's events are joined to). Asked of the engine's own listeners, not of
    ``event.contains``, which keys them by ``id()``: an engine at the address of a freed,
    configured one whose listeners the garbage collector had not reached yet would
    pass for configured (``transactions._restore_at_checkin``)."""
    return engine in _twins or _on_sqlite_begin in engine.dispatch.begin


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
    remember_typed_url(twin, typed_url(sync_engine))
    return twin


_twins: weakref.WeakSet[Engine] = weakref.WeakSet()
"""The twins ``create_sqlite_twin`` made: configured through their parent's ``begin``."""


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
