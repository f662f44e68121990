"""Migration runs that concurrent upgraders cannot race: the database-wide lock each
run holds, the transaction shape of a run, and where offline SQL cannot be made.
Each differs by database (``_dialects.Capabilities.migration_lock`` and
``single_file``), said where it does."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, text
from sqlalchemy.engine import URL

from .._dialects import CAPABILITIES, capabilities
from ..engine import brief_transaction, sqlite_migration_connection
from ..errors import DatabaseLockedError, SchemaError

# pg_advisory_lock takes a bigint: the ASCII of "agentled" read as one.
_PG_MIGRATION_LOCK_KEY = int.from_bytes(b"agentled", "big")
_MYSQL_MIGRATION_LOCK = "agentledger_migrations"
MIGRATION_LOCK_TIMEOUT_S = 600


@contextmanager
def migration_lock(connection: Connection) -> Iterator[None]:
    """Hold a database-wide lock for a whole migration run, so concurrent upgraders
    take turns instead of racing to create the same tables.

    PostgreSQL: a session-level advisory lock (it survives the per-migration commits).
    MariaDB/MySQL: GET_LOCK, also session-level (DDL commits implicitly there).
    SQLite: nothing here; the run is one BEGIN IMMEDIATE transaction, whose write
    lock is the serialisation (see engine.sqlite_migration_connection).
    """
    lock = capabilities(connection.dialect).migration_lock
    if lock == "advisory":
        _run_outside_caller_transaction(
            connection, "SELECT pg_advisory_lock(:key)", key=_PG_MIGRATION_LOCK_KEY
        )
        try:
            yield
        finally:
            _run_outside_caller_transaction(
                connection, "SELECT pg_advisory_unlock(:key)", key=_PG_MIGRATION_LOCK_KEY
            )
    elif lock == "named":
        got = _run_outside_caller_transaction(
            connection,
            "SELECT GET_LOCK(:name, :timeout)",
            name=_MYSQL_MIGRATION_LOCK,
            timeout=MIGRATION_LOCK_TIMEOUT_S,
        )
        if got != 1:
            raise DatabaseLockedError(
                f"another agentledger migration held the lock for {MIGRATION_LOCK_TIMEOUT_S} s"
            )
        try:
            yield
        finally:
            _run_outside_caller_transaction(
                connection, "SELECT RELEASE_LOCK(:name)", name=_MYSQL_MIGRATION_LOCK
            )
    else:
        yield


def _run_outside_caller_transaction(connection: Connection, sql: str, **params: object) -> object:
    # Session-level locks must not leave a transaction open that the migrations would
    # then run inside (Alembic commits per migration only when it began the transaction).
    with brief_transaction(connection, commit=True):
        return connection.execute(text(sql), params).scalar()


@contextmanager
def migration_run(connection: Connection) -> Iterator[dict[str, Any]]:
    """The ``connection`` and ``transaction_per_migration`` options of Alembic's
    ``configure()`` for a migration run on ``connection``.

    SQLite runs the whole upgrade as one ``BEGIN IMMEDIATE`` transaction with foreign
    keys off (see engine.sqlite_migration_connection): its batch-mode table rebuilds
    would otherwise cascade-delete child rows, and the write lock is what serialises
    concurrent upgraders. Elsewhere each revision runs in a transaction of its own.
    """
    if capabilities(connection.dialect).single_file:
        with sqlite_migration_connection(connection) as migrating:
            yield {"connection": migrating, "transaction_per_migration": False}
    else:
        yield {"connection": connection, "transaction_per_migration": True}


SQLITE_OFFLINE_REFUSAL = (
    "offline SQL is not available for SQLite: its migrations rebuild tables in batch "
    "mode, which needs a live database"
)


_SQLITE_OFFLINE_HINT = (
    "run `agentledger db upgrade --url sqlite:///...` against the database, or render "
    "SQL for PostgreSQL or MySQL with --url postgresql:// or --url mysql://"
)


def check_offline_sql(url: URL) -> None:
    """Refuse to render migrations as SQL (offline) for a database where they need a
    live connection: SQLite's batch-mode rebuilds copy the table as it is."""
    known = CAPABILITIES.get(url.get_backend_name())  # offline SQL may be for any dialect
    if known is not None and known.single_file:
        raise SchemaError(SQLITE_OFFLINE_REFUSAL, hint=_SQLITE_OFFLINE_HINT)
