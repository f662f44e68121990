"""Pool behaviour and timeouts: reset on return, the idle ping, lock and statement
timeouts, and the settings a pooler or a driver's quirk asks for.

Each knob here changes how a pooled connection is handed out, given back or set up
once connected, never which SQL a call sends: the engine options by backend, a reset
that rolls back only what is open, a ping only for a connection idle a while, the
timeouts a ledger sets on its own engine, the options for pgbouncer in transaction mode
and the fix that lets aiomysql send bytes again.
"""

from __future__ import annotations

import logging
import math
import secrets
import sys
import time
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Dialect
from sqlalchemy.pool import ConnectionPoolEntry, PoolResetState

from .._dialects import GALERA_SYNC_WAIT, tested
from ..errors import ValidationError

logger = logging.getLogger("agentledger.engine")

SQLITE_BUSY_TIMEOUT_MS = 15_000
DEFAULT_LOCK_TIMEOUT_S = SQLITE_BUSY_TIMEOUT_MS / 1000
"""How long a ledger's statements wait for a lock by default, on every dialect."""


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


def configure_timeouts(
    engine: Engine,
    *,
    lock_timeout: float | None,
    statement_timeout: float | None,
    cluster_sync_wait: bool = True,
) -> None:
    """Set a lock timeout (seconds; ``DEFAULT_LOCK_TIMEOUT_S`` when None) and, when
    given, a statement timeout on every new
    connection of ``engine`` (an engine a ledger created); with ``cluster_sync_wait``,
    a connection to a Galera node also waits, at the start of each transaction, until
    the node has applied what the cluster committed before (``GALERA_SYNC_WAIT``:
    read-your-writes across nodes, one round trip per new connection to ask
    ``wsrep_on`` on MariaDB/MySQL).

    PostgreSQL: ``lock_timeout`` and ``statement_timeout``. MariaDB/MySQL:
    ``innodb_lock_wait_timeout`` (whole seconds, rounded up) and MariaDB's
    ``max_statement_time`` (MySQL: ``max_execution_time``, which bounds SELECTs only).
    SQLite: the busy timeout; it has no statement timeout (a statement there waits on
    nothing but the lock). Any other dialect: none, the database's own apply; one asked
    for there is refused, as agentledger does not know how to set it.

    Raises:
        ValidationError: a timeout given for a dialect agentledger was not tested on.
    """
    backend = engine.dialect.name
    if not tested(engine.dialect):
        given = [name for name, value in (("lock_timeout", lock_timeout),
                 ("statement_timeout", statement_timeout)) if value is not None]  # fmt: skip
        if given:
            raise ValidationError(
                f"{given[0]}: agentledger does not know how to set a timeout on the "
                f"{backend} dialect (not tested there); leave it out, and set the "
                "database's own on its side",
                path=given[0],
            )
        return
    if lock_timeout is None:
        lock_timeout = DEFAULT_LOCK_TIMEOUT_S
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
            if backend in ("mysql", "mariadb") and cluster_sync_wait:
                cursor.execute("SHOW VARIABLES LIKE 'wsrep_on'")
                found = cursor.fetchone()
                if found is not None and str(found[1]).upper() == "ON":
                    cursor.execute("SET SESSION wsrep_sync_wait = %s", (GALERA_SYNC_WAIT,))
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
    logger.debug(
        "each new connection of %s waits %s s for a lock; statements run %s",
        engine.url.render_as_string(hide_password=True),
        lock_timeout,
        "unbounded" if statement_timeout is None else f"up to {statement_timeout} s",
    )


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
