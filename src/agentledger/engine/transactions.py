"""How a ledger marks and begins its transactions: the execution options it sets on
connections and statements, the read policy, and a brief transaction of its own.

The option names are read by the SQLite begin listener (``sqlite``) and by driver SQL
(``agentledger._driver``), and set by the repositories: they live in this small module,
which imports nothing else of ``engine``, so that each of those can import them without
a cycle through the package.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, event
from sqlalchemy.pool import ConnectionPoolEntry, Pool

WRITE_OPTION = "agentledger_write"
"""Connection execution option: this transaction will write (SQLite: BEGIN IMMEDIATE)."""
ONE_STATEMENT_OPTION = "agentledger_one_statement"
"""Connection execution option: this read-only transaction is one statement (SQLite: no
BEGIN; in autocommit mode one statement is one read transaction, one snapshot)."""
ALONE_OPTION = "agentledger_alone"
"""Statement execution option: this statement is atomic by itself, and comes after
statements that wrote nothing, so on driver SQL in the driver's autocommit it runs as its
own transaction even as a call's second statement (``_driver.DriverConnection``)."""


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
        if not commit:
            connection.rollback()
            return
        try:
            connection.commit()
        except BaseException:
            # A COMMIT that failed (a Galera node's certification conflict, 1213) leaves
            # the connection needing a rollback before its next statement.
            connection.rollback()
            raise


_READ_ONLY_BEFORE = "agentledger_read_only_before"
"""Connection record info: the driver's read-only setting before ``read_only_transaction``
set it, to put back when the connection returns to the pool."""


def read_only_transaction(connection: Connection) -> None:
    """Make the transaction ``connection`` is about to begin READ ONLY (PostgreSQL),
    and only that transaction: the driver's read-only setting goes back to what it was
    when the connection returns to the pool.

    SQLAlchemy's ``postgresql_readonly`` option does the first part, but on return
    sets the driver to read-*write* (psycopg's and psycopg2's ``read_only = False``,
    where they had None, "the server's default"), and from then on they begin every
    transaction on that connection ``READ WRITE`` explicitly. A hot standby refuses
    that (SQLSTATE 0A000, "cannot set transaction read-write mode during recovery"),
    so after one read-only unit of work every later transaction failed there; and a
    server with ``default_transaction_read_only`` on let writes through that it
    refuses otherwise. The setting stays on the client for psycopg, psycopg2 and
    asyncpg (the BEGIN carries it: no round trip); pg8000 sets it with a statement.
    Call it before the transaction's first statement.
    """
    dialect = connection.dialect
    pooled = connection.connection
    driver = pooled.dbapi_connection
    if _READ_ONLY_BEFORE not in pooled.info:
        pooled.info[_READ_ONLY_BEFORE] = (dialect, dialect.get_readonly(driver))  # type: ignore[attr-defined]
    dialect.set_readonly(driver, True)  # type: ignore[attr-defined]
    _restore_at_checkin(connection.engine.pool)


def _restore_at_checkin(pool: Pool) -> None:
    """Have ``pool`` run ``_restore_read_only`` at each checkin, once.

    Asked of the pool's own listeners, not of ``event.contains``: SQLAlchemy's event
    registry keys a listener by the ``id()`` of its target, and a pool freed while its
    listener collection still waited for the garbage collector left an entry that a new
    pool at the same address matched. ``contains`` then said yes for a pool without
    the listener, its connections kept beginning READ ONLY after one read-only unit of
    work, and the next write there failed ("cannot execute UPDATE in a read-only
    transaction": 1 in 4 runs of the OpenAI SDK's compaction tests, whose loops each
    get a new engine). A pool made by ``recreate()`` (``engine.dispose()``) already
    has the listener, copied from the pool it replaces."""
    if _restore_read_only not in pool.dispatch.checkin:
        event.listen(pool, "checkin", _restore_read_only)


def _restore_read_only(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    """At checkin, after SQLAlchemy's own reset: the driver's read-only setting as it
    was before ``read_only_transaction`` (an invalidated connection has none to keep).
    A connection whose setting cannot be put back is invalidated rather than pooled:
    it would begin every later transaction READ ONLY."""
    saved = record.info.pop(_READ_ONLY_BEFORE, None)
    if saved is None or dbapi_connection is None:
        return
    dialect, before = saved
    try:
        dialect.set_readonly(dbapi_connection, before)
    except Exception as error:
        record.invalidate(error)
