"""Statements that differ by dialect, each with the reason it differs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, Table, func, select, text, update
from sqlalchemy.dialects.mysql import insert as mysql_insert
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from .errors import DatabaseLockedError
from .models import AgentGrant, AgentSession

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
    dialect = connection.dialect.name
    if dialect == "postgresql":
        _run_outside_caller_transaction(
            connection, "SELECT pg_advisory_lock(:key)", key=_PG_MIGRATION_LOCK_KEY
        )
        try:
            yield
        finally:
            _run_outside_caller_transaction(
                connection, "SELECT pg_advisory_unlock(:key)", key=_PG_MIGRATION_LOCK_KEY
            )
    elif dialect in ("mysql", "mariadb"):
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
    began = not connection.in_transaction()
    value = connection.execute(text(sql), params).scalar()
    if began:
        connection.commit()
    return value


def allocate_step_seqs(
    session: Session, id: str, count: int, usage: tuple[int, int, int], now: datetime
) -> int | None:
    """Reserve ``count`` step seqs on session ``id`` and add ``usage`` to its totals.

    One UPDATE under the session row's lock, so concurrent appenders get contiguous
    seqs and exact totals; the revision is left alone (steps never conflict with a
    save). Returns the last seq reserved, or None when the session does not exist.

    PostgreSQL and SQLite read the new counter back with ``UPDATE ... RETURNING``.
    MariaDB/MySQL have no UPDATE RETURNING: the counter goes through
    ``LAST_INSERT_ID(expr)``, which the next ``SELECT LAST_INSERT_ID()`` on the same
    connection returns, still inside the transaction.
    """
    table = cast(Table, AgentSession.__table__)
    values: dict[str, Any] = {
        "step_count": table.c.step_count + count,
        "input_tokens": table.c.input_tokens + usage[0],
        "output_tokens": table.c.output_tokens + usage[1],
        "total_tokens": table.c.total_tokens + usage[2],
        "updated_at": now,
    }
    statement = update(table).where(table.c.id == id)
    if session.connection().dialect.update_returning:
        row = session.execute(statement.values(values).returning(table.c.step_count)).first()
        return None if row is None else int(row[0])
    values["step_count"] = func.last_insert_id(table.c.step_count + count)
    if session.execute(statement.values(values)).rowcount == 0:  # type: ignore[attr-defined]
        return None
    return int(session.execute(select(func.last_insert_id())).scalar_one())


def upsert_grant(session: Session, values: dict[str, Any]) -> None:
    """Insert a grant, or refresh ``granted_by``, ``granted_at`` and ``expires_at`` of the
    one already there, in one statement that concurrent granters cannot race.

    PostgreSQL and SQLite spell it ``ON CONFLICT ... DO UPDATE``; MariaDB/MySQL
    ``ON DUPLICATE KEY UPDATE``.
    """
    table = cast(Table, AgentGrant.__table__)
    refreshed = ("granted_by", "granted_at", "expires_at")
    dialect = session.connection().dialect.name
    if dialect in ("postgresql", "sqlite"):
        insert = postgresql_insert if dialect == "postgresql" else sqlite_insert
        statement = insert(table).values(values)
        session.execute(
            statement.on_conflict_do_update(
                index_elements=[table.c.session_id, table.c.capability_hash],
                set_={name: statement.excluded[name] for name in refreshed},
            )
        )
        return
    statement_mysql = mysql_insert(table).values(values)
    session.execute(
        statement_mysql.on_duplicate_key_update(
            {name: statement_mysql.inserted[name] for name in refreshed}
        )
    )
