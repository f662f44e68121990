"""Migration runs that concurrent upgraders cannot race: the database-wide lock each
run holds, the transaction shape of a run, and where offline SQL cannot be made.
Each differs by database (``_dialects.Capabilities.migration_lock`` and
``single_file``), said where it does."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError

from .._dialects import CAPABILITIES, GALERA_SYNC_WAIT, capabilities
from .._probe import cluster_of
from ..engine import brief_transaction, sqlite_migration_connection
from ..errors import DatabaseLockedError, SchemaError

# pg_advisory_lock takes a bigint: the ASCII of "agentled" read as one.
_PG_MIGRATION_LOCK_KEY = int.from_bytes(b"agentled", "big")
_MYSQL_MIGRATION_LOCK = "agentledger_migrations"
MIGRATION_LOCK_TIMEOUT_S = 600
LEASE_TABLE = "agentledger_migration_lease"
"""Galera's migration lock: one row, whose insert the cluster certifies (see
``_certified_lease``). Not one of agentledger's tables: ``db check`` ignores it."""
_LEASE_POLL_S = (0.1, 0.5)
_CREATE_LEASE_TABLE = (
    "CREATE TABLE IF NOT EXISTS agentledger_migration_lease (name VARCHAR(32) PRIMARY KEY, "
    "holder CHAR(32) NOT NULL, expires_at DATETIME(6) NOT NULL) ENGINE=InnoDB"
)
_DROP_EXPIRED_LEASE = (
    "DELETE FROM agentledger_migration_lease "
    "WHERE name = 'migrations' AND expires_at < UTC_TIMESTAMP(6)"
)
_TAKE_LEASE = (
    "INSERT INTO agentledger_migration_lease (name, holder, expires_at) "
    "VALUES ('migrations', :holder, UTC_TIMESTAMP(6) + INTERVAL :seconds SECOND)"
)
_SET_SYNC_WAIT = "SET SESSION wsrep_sync_wait = :value"
_RELEASE_LEASE = "DELETE FROM agentledger_migration_lease WHERE holder = :holder"
_DUPLICATE_KEY, _DEADLOCK = 1062, 1213


@contextmanager
def migration_lock(connection: Connection) -> Iterator[None]:
    """Hold a database-wide lock for a whole migration run, so concurrent upgraders
    take turns instead of racing to create the same tables.

    PostgreSQL: a session-level advisory lock (it survives the per-migration commits).
    MariaDB/MySQL: GET_LOCK, also session-level (DDL commits implicitly there); on a
    Galera cluster a certified lease row instead, since GET_LOCK is node-local there.
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
    elif lock == "named" and galera(connection):
        with _certified_lease(connection):
            yield
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


def galera(connection: Connection) -> bool:
    """Whether ``connection`` is to a node of a Galera cluster (``wsrep_on``, as the
    capability probe finds it: ``_probe.cluster_of``)."""
    return cluster_of(connection) == "galera"


@contextmanager
def _certified_lease(connection: Connection) -> Iterator[None]:
    """Galera's migration lock: insert the lease row, which certification lets one
    node's upgrader hold at a time (another node's insert of the same key fails at
    COMMIT with 1213, or with 1062 once the row has reached it); wait and try again
    until it is free. A lease left by a crashed upgrader expires after
    MIGRATION_LOCK_TIMEOUT_S. The run reads with ``wsrep_sync_wait`` so it sees the
    schema the previous holder left, whichever node that holder wrote on."""
    holder = uuid.uuid4().hex
    _run_outside_caller_transaction(connection, _CREATE_LEASE_TABLE)
    deadline = time.monotonic() + MIGRATION_LOCK_TIMEOUT_S
    while not _took_lease(connection, holder):
        if time.monotonic() > deadline:
            raise DatabaseLockedError(
                f"another agentledger migration held the lease for {MIGRATION_LOCK_TIMEOUT_S} s"
            )
        time.sleep(random.uniform(*_LEASE_POLL_S))
    before = _run_outside_caller_transaction(connection, "SELECT @@session.wsrep_sync_wait")
    _run_outside_caller_transaction(connection, _SET_SYNC_WAIT, value=GALERA_SYNC_WAIT)
    try:
        yield
    finally:
        _run_outside_caller_transaction(connection, _SET_SYNC_WAIT, value=before)
        _run_outside_caller_transaction(connection, _RELEASE_LEASE, holder=holder)


def _took_lease(connection: Connection, holder: str) -> bool:
    try:
        _run_outside_caller_transaction(connection, _DROP_EXPIRED_LEASE)
        _run_outside_caller_transaction(
            connection, _TAKE_LEASE, holder=holder, seconds=MIGRATION_LOCK_TIMEOUT_S
        )
    except DBAPIError as error:
        code = error.orig.args[0] if error.orig is not None and error.orig.args else None
        if code in (_DUPLICATE_KEY, _DEADLOCK):
            return False
        raise
    return True


def _run_outside_caller_transaction(connection: Connection, sql: str, **params: object) -> object:
    # Session-level locks must not leave a transaction open that the migrations would
    # then run inside (Alembic commits per migration only when it began the transaction).
    with brief_transaction(connection, commit=True):
        result = connection.execute(text(sql), params)
        return result.scalar() if result.returns_rows else None


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
