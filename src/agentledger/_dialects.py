"""Statements and migration steps that differ by dialect, each with the reason it differs."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

from sqlalchemy import (
    Column,
    ColumnElement,
    Connection,
    Insert,
    Integer,
    Select,
    String,
    Table,
    Text,
    Update,
    and_,
    bindparam,
    case,
    func,
    literal,
    select,
    text,
    true,
    union_all,
    update,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.mysql import insert as mysql_insert
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session

from .engine import ALONE_OPTION, brief_transaction, sqlite_migration_connection
from .errors import DatabaseLockedError, SchemaError
from .models import AgentCheckpoint, AgentGrant, AgentSession

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


@contextmanager
def creators_take_turns(connection: Connection, key: str) -> Iterator[None]:
    """Around an INSERT that may collide with another creator's (``key`` names the row):
    on MariaDB/MySQL, creators of one row take turns under a named lock.

    InnoDB answers a duplicate key with a *shared* lock on the stored row; two losers
    of one creation race both hold it, and each then upgrading it (FOR UPDATE, for the
    writes their unit of work goes on to make) deadlocks with the other. Taking turns,
    one loser at a time holds that shared lock, and its upgrade waits for nobody.
    PostgreSQL reports a duplicate without a lock on the row, and SQLite's write
    transactions already run one at a time: nothing to do there. The wait for the
    named lock is bounded by the connection's lock wait timeout.
    """
    if connection.dialect.name not in ("mysql", "mariadb"):
        yield
        return
    name = "agentledger_create_" + hashlib.sha256(key.encode()).hexdigest()[:40]
    got = connection.execute(
        text("SELECT GET_LOCK(:name, @@innodb_lock_wait_timeout)"), {"name": name}
    ).scalar()
    if got != 1:
        raise DatabaseLockedError(f"another creator of {key!r} held its lock too long")
    try:
        yield
    finally:
        connection.execute(text("SELECT RELEASE_LOCK(:name)"), {"name": name})


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
    if connection.dialect.name == "sqlite":
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
    if url.get_backend_name() == "sqlite":
        raise SchemaError(SQLITE_OFFLINE_REFUSAL, hint=_SQLITE_OFFLINE_HINT)


TOKEN_LIMIT = 2**63 - 1
"""The largest token total a session holds (its BIGINT columns)."""
TOKEN_COLUMNS = ("input_tokens", "output_tokens", "total_tokens")


def _step_seqs_statement(returning: bool) -> Update:
    """The UPDATE of ``allocate_step_seqs``, with its new counter returned or put
    through ``LAST_INSERT_ID(expr)``. Every total is bounded, whether or not the call
    adds to it (a total at most ``TOKEN_LIMIT`` minus nothing holds for every row)."""
    table = cast(Table, AgentSession.__table__)
    count = table.c.step_count + bindparam("b_count", type_=Integer())
    values: dict[str, Any] = {
        "step_count": count if returning else func.last_insert_id(count),
        **{name: table.c[name] + bindparam(f"b_{name}") for name in TOKEN_COLUMNS},
        "updated_at": bindparam("b_now", type_=table.c.updated_at.type),
    }
    statement = (
        update(table)
        .where(
            table.c.id == bindparam("b_id"),
            *(table.c[name] <= bindparam(f"b_{name}_limit") for name in TOKEN_COLUMNS),
        )
        .values(values)
    )
    return statement.returning(table.c.step_count) if returning else statement


# Built once: building and cache-keying a statement per call cost more than running it.
_STEP_SEQS = {returning: _step_seqs_statement(returning) for returning in (True, False)}
_LAST_INSERT_ID = select(func.last_insert_id())


def allocate_step_seqs(
    session: Session, id: str, count: int, usage: tuple[int, int, int], now: datetime
) -> int | None:
    """Reserve ``count`` step seqs on session ``id`` and add ``usage`` to its totals.

    One UPDATE under the session row's lock, so concurrent appenders get contiguous
    seqs and exact totals; the revision is left alone (steps never conflict with a
    save). Returns the last seq reserved, or None when no row matched: the session does
    not exist, or a total would pass ``TOKEN_LIMIT`` (the row is then left as it was).

    PostgreSQL and SQLite read the new counter back with ``UPDATE ... RETURNING``.
    MariaDB/MySQL have no UPDATE RETURNING: the counter goes through
    ``LAST_INSERT_ID(expr)``, which the next ``SELECT LAST_INSERT_ID()`` on the same
    connection returns, still inside the transaction.
    """
    connection = session.connection()
    params: dict[str, Any] = {"b_id": id, "b_count": count, "b_now": now}
    for name, added in zip(TOKEN_COLUMNS, usage, strict=True):
        params[f"b_{name}"] = added
        params[f"b_{name}_limit"] = TOKEN_LIMIT - added
    returning = bool(connection.dialect.update_returning)
    result = connection.execute(_STEP_SEQS[returning], params)
    if returning:
        row = result.first()
        return None if row is None else int(row[0])
    if result.rowcount == 0:
        return None
    return int(connection.execute(_LAST_INSERT_ID).scalar_one())


def returns_from_update(session: Session) -> bool:
    """Whether a versioned ORM UPDATE of a session row can also return its columns.

    PostgreSQL and SQLite have ``UPDATE ... RETURNING`` and still report the rows the
    UPDATE matched, which the version check needs; the write then needs no SELECT to
    hand back the fresh record. MariaDB/MySQL have no UPDATE RETURNING: a SELECT reads
    the row back, in the same transaction, under the lock the UPDATE took.
    """
    return bool(session.get_bind().dialect.update_returning)


def appends_in_one_statement(session: Session) -> bool:
    """Whether an append can write the session row and insert its messages in one
    statement (``_session_row.write_versioned_and_insert``).

    PostgreSQL has data-modifying CTEs: the INSERT selects from the versioned UPDATE's
    RETURNING, so the messages are stored only when the revision matched, in one round
    trip. SQLite and MariaDB/MySQL have no DML inside WITH: an UPDATE, then an INSERT.
    """
    return session.get_bind().dialect.name == "postgresql"


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


def missing_row_lock_is_safe(session: Session) -> bool:
    """Whether a ``SELECT ... FOR UPDATE`` of a row that may be missing can come before
    inserting it: on PostgreSQL and SQLite a missing row locks nothing, so a merge into an
    existing row needs no INSERT attempt first; on MariaDB/MySQL it takes a gap lock, and
    two such transactions deadlock on their INSERTs (see ``insert_if_absent``)."""
    return session.connection().dialect.name in ("postgresql", "sqlite")


def insert_if_absent(
    session: Session, table: Table, values: dict[str, Any], keys: tuple[str, ...]
) -> None:
    """Insert a row unless one with the same primary key exists, in one statement that
    concurrent inserters cannot race (the loser waits for the winner, then does nothing).

    A SELECT ... FOR UPDATE of a missing row first would not do: on MariaDB/MySQL it
    takes a gap lock, and two such transactions then deadlock on their INSERTs.
    PostgreSQL and SQLite spell it ``ON CONFLICT DO NOTHING``; MariaDB/MySQL
    ``ON DUPLICATE KEY UPDATE`` of a key column to itself (INSERT IGNORE would also
    turn other errors into warnings).
    """
    dialect = session.connection().dialect.name
    if dialect in ("postgresql", "sqlite"):
        insert = postgresql_insert if dialect == "postgresql" else sqlite_insert
        session.execute(insert(table).values(values).on_conflict_do_nothing(index_elements=keys))
        return
    statement = mysql_insert(table).values(values)
    session.execute(statement.on_duplicate_key_update({keys[0]: table.c[keys[0]]}))


def _checkpoint_seq_statement(returning: bool) -> Update:
    """The UPDATE of ``allocate_checkpoint_seq`` without a condition, with its new
    counter returned or put through ``LAST_INSERT_ID(expr)``."""
    table = cast(Table, AgentSession.__table__)
    seq = table.c.checkpoint_seq + 1
    statement = (
        update(table)
        .where(table.c.id == bindparam("b_id"))
        .values(
            checkpoint_seq=seq if returning else func.last_insert_id(seq),
            latest_checkpoint_ref=bindparam("b_ref"),
            updated_at=bindparam("b_now", type_=table.c.updated_at.type),
        )
    )
    return statement.returning(table.c.checkpoint_seq) if returning else statement


_CHECKPOINT_SEQ = {returning: _checkpoint_seq_statement(returning) for returning in (True, False)}


def allocate_checkpoint_seq(
    session: Session,
    id: str,
    ref: str,
    now: datetime,
    *,
    condition: ColumnElement[bool] | None = None,
) -> int | None:
    """Take the next checkpoint seq of session ``id`` and make ``ref`` its latest
    checkpoint, when ``condition`` (a compare-and-set on the row) holds.

    One UPDATE under the session row's lock, so the seq and the pointer move together
    and two savers from one parent cannot both match; the revision is left alone
    (checkpoints never conflict with a save). Returns the seq taken, or None when no
    row matched (no such session, or ``condition`` was false). Without a condition the
    statement is built once.

    PostgreSQL and SQLite read the new counter back with ``UPDATE ... RETURNING``;
    MariaDB/MySQL, which have no UPDATE RETURNING, through ``LAST_INSERT_ID(expr)``
    (see ``allocate_step_seqs``).
    """
    connection = session.connection()
    returning = bool(connection.dialect.update_returning)
    statement = _CHECKPOINT_SEQ[returning]
    if condition is not None:
        statement = statement.where(condition)
    result = connection.execute(statement, {"b_id": id, "b_ref": ref, "b_now": now})
    if returning:
        row = result.first()
        return None if row is None else int(row[0])
    if result.rowcount == 0:
        return None
    return int(connection.execute(_LAST_INSERT_ID).scalar_one())


def json_from_text(session: Session, json_text: str) -> ColumnElement[Any]:
    """A value for a JSON column from JSON text agentledger serialised (and measured)
    itself, so the column type does not serialise it a second time.

    The engine's default encoder escapes every non-ASCII character (up to six bytes
    for one), so a payload checked at its limit could grow 3.5 times on MariaDB after
    the driver's own escaping, past the 16 MiB packet. PostgreSQL needs the text cast
    to ``json`` (its drivers send the parameter typed as text); SQLite and MariaDB
    keep JSON as text, and MariaDB has no CAST to JSON.
    """
    value = literal(json_text, Text())
    if session.connection().dialect.name == "postgresql":
        return sql_cast(value, postgresql.JSON())
    return value


_JSON_TEXT_INSERTS: dict[tuple[str, str, bool], Insert] = {}


def insert_json_text(connection: Connection, table: Table, column: str) -> Insert:
    """An INSERT into ``table`` whose ``column`` takes JSON text agentledger serialised
    itself (the parameter ``b_<column>``; see ``json_from_text``), the other columns
    from the execute parameters. Built once per table and dialect: cast to ``json`` on
    PostgreSQL, the text itself elsewhere."""
    postgres = connection.dialect.name == "postgresql"
    key = (table.name, column, postgres)
    statement = _JSON_TEXT_INSERTS.get(key)
    if statement is None:
        value: ColumnElement[Any] = bindparam(f"b_{column}", type_=Text())
        if postgres:
            value = sql_cast(value, postgresql.JSON())
        statement = _JSON_TEXT_INSERTS.setdefault(key, table.insert().values({column: value}))
    return statement


def snapshot_read_options(dialect_name: str) -> dict[str, Any]:
    """Engine options for one long read transaction that must see a single snapshot
    (an export, the source side of a copy), read page by page.

    PostgreSQL's default READ COMMITTED takes a new snapshot per statement, so later
    pages could disagree with earlier ones; REPEATABLE READ keeps the first (and a
    read-only transaction there never fails to serialize). MariaDB/MySQL's default
    REPEATABLE READ and a SQLite read transaction (WAL) already read one snapshot.
    """
    if dialect_name == "postgresql":
        return {"isolation_level": "REPEATABLE READ", "postgresql_readonly": True}
    return {}


def stream_options(connection: Connection, partition: int) -> dict[str, Any]:
    """Connection options that fetch a large answer ``partition`` rows at a time, from a
    server-side cursor where the driver has one (psycopg, asyncpg, PyMySQL, aiomysql).

    PostgreSQL declares server-side cursors only inside a transaction, and a ledger's
    own read calls there run in AUTOCOMMIT (``engine.read_only_options``): those fetch
    the answer at once. Inside a unit of work every dialect streams.
    """
    if (
        connection.dialect.name == "postgresql"
        and connection.get_execution_options().get("isolation_level") == "AUTOCOMMIT"
    ):
        return {}
    return {"yield_per": partition}


def begin_snapshot(connection: Connection) -> None:
    """Begin a read-only unit of work's transaction where its options cannot.

    PostgreSQL gets REPEATABLE READ READ ONLY from the connection options
    (``snapshot_read_options``: the snapshot is the first statement's), and SQLite's
    deferred BEGIN reads one snapshot from its first read (WAL). MariaDB/MySQL have no
    such option in SQLAlchemy: this sends the statements that start a read-only
    transaction on a snapshot taken now (at REPEATABLE READ whatever the session's
    level, since a consistent snapshot means nothing at READ COMMITTED; the SET is
    skipped, a round trip less, when the connection is at REPEATABLE READ already, the
    server's default). A write inside it fails on the server too (errno 1792).
    """
    if connection.dialect.name in ("mysql", "mariadb"):
        level = connection.get_execution_options().get("isolation_level")
        if (level or connection.default_isolation_level) != "REPEATABLE READ":
            connection.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        connection.exec_driver_sql("START TRANSACTION READ ONLY, WITH CONSISTENT SNAPSHOT")


def sqlite_sizes(connection: Connection) -> tuple[int, int] | None:
    """SQLite: (file size, free space inside it) in bytes; None on other databases.

    SQLite keeps the pages a delete frees inside the file for reuse; only VACUUM gives
    them back to the file system. PostgreSQL and MariaDB reuse freed space on their own.
    """
    if connection.dialect.name != "sqlite":
        return None
    page_size = int(connection.exec_driver_sql("PRAGMA page_size").scalar_one())
    pages = int(connection.exec_driver_sql("PRAGMA page_count").scalar_one())
    free = int(connection.exec_driver_sql("PRAGMA freelist_count").scalar_one())
    return pages * page_size, free * page_size


def sqlite_vacuum(connection: Connection) -> None:
    """SQLite: rebuild the file without its free pages, then truncate the WAL.

    VACUUM cannot run inside a transaction, and SQLAlchemy would begin one on the first
    statement, so it runs on the driver connection (whose own transaction handling is
    off, see engine/sqlite.py). It needs about the database's size again in free disk space.
    """
    driver_connection = connection.connection.dbapi_connection
    assert driver_connection is not None
    cursor = driver_connection.cursor()
    try:
        cursor.execute("VACUUM")
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        cursor.close()


_CHECKPOINT_SESSION_INDEX = "uq_agentledger_checkpoints_session_id_seq"
S = TypeVar("S", bound=Select[Any])


def on_checkpoint_session_index(query: S) -> S:
    """``query`` (over one session's checkpoints) pinned to the (session_id, seq) index.

    MariaDB/MySQL only (the hint renders nowhere else): on a small or skewed table
    their optimizer may scan the whole table instead, and a locking read (or a locking
    subquery) that scans under REPEATABLE READ locks every session's rows, so
    unrelated writers wait or deadlock.
    """
    table = cast(Table, AgentCheckpoint.__table__)
    hint = f"FORCE INDEX ({_CHECKPOINT_SESSION_INDEX})"
    return query.with_hint(table, hint, "mysql").with_hint(table, hint, "mariadb")


def drop_temporary_table(connection: Connection, name: str) -> None:
    """Drop a temporary table after its transaction was rolled back.

    PostgreSQL and SQLite roll CREATE TEMPORARY TABLE back with the transaction;
    MariaDB/MySQL do not, and the table would outlive the probe on a pooled
    connection. ``DROP TEMPORARY TABLE`` there can only touch a temporary table.
    """
    if connection.dialect.name in ("mysql", "mariadb"):
        quoted = connection.dialect.identifier_preparer.quote(name)
        connection.execute(text(f"DROP TEMPORARY TABLE IF EXISTS {quoted}"))


_PREBUILT: dict[tuple[Any, ...], Any] = {}
"""The row-writing statements of ``insert_missing`` and ``upsert_rows``, built once per
(dialect, table, columns...), so SQLAlchemy's compiled cache serves them."""


def _rows_statement(
    dialect: str,
    table: Table,
    names: tuple[str, ...],
    keys: tuple[str, ...],
    refreshed: tuple[str, ...] | None,
) -> Any:
    """An INSERT of one row of the columns ``names`` (each bound as ``r_{name}``), run
    once per row as an executemany: insert-if-absent when ``refreshed`` is None, else an
    upsert replacing those columns. One statement of many rows (a multi-row VALUES) is
    one SQLAlchemy cannot cache: it was compiled again on every call, a quarter of a
    MariaDB put. PyMySQL and aiomysql send an INSERT's executemany as one multi-row
    statement; sqlite3 runs it in-process."""
    cache_key = (dialect, table.name, names, keys, refreshed)
    found = _PREBUILT.get(cache_key)
    if found is not None:
        return found
    row = {name: bindparam(f"r_{name}", type_=table.c[name].type) for name in names}
    statement: Any
    if dialect in ("postgresql", "sqlite"):
        insert = postgresql_insert if dialect == "postgresql" else sqlite_insert
        statement = insert(table).values(row)
        if refreshed is None:
            statement = statement.on_conflict_do_nothing(index_elements=keys)
        else:
            statement = statement.on_conflict_do_update(
                index_elements=keys, set_={name: statement.excluded[name] for name in refreshed}
            )
    else:
        statement = mysql_insert(table).values(row)
        if refreshed is None:
            statement = statement.on_duplicate_key_update({keys[0]: table.c[keys[0]]})
        else:
            statement = statement.on_duplicate_key_update(
                {name: statement.inserted[name] for name in refreshed}
            )
    _PREBUILT[cache_key] = statement
    return statement


def _row_params(
    rows: Sequence[dict[str, Any]], names: tuple[str, ...], prefix: str
) -> dict[str, Any]:
    return {f"{prefix}{i}_{name}": row[name] for i, row in enumerate(rows) for name in names}


def _each_row_params(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The executemany parameters of ``_rows_statement`` for ``rows``."""
    return [{f"r_{name}": value for name, value in row.items()} for row in rows]


def insert_missing(
    connection: Any, table: Table, rows: Sequence[dict[str, Any]], keys: tuple[str, ...]
) -> None:
    """Insert ``rows``, leaving alone each one whose primary key is already stored:
    ``insert_if_absent`` for many rows at once. ``ON CONFLICT DO NOTHING`` on PostgreSQL
    and SQLite; MariaDB/MySQL's ``INSERT IGNORE`` would hide other errors too, so a no-op
    ``ON DUPLICATE KEY UPDATE`` there. ``connection``: a Connection, or a
    ``_driver.DriverConnection`` (prebuilt statements run on both)."""
    if not rows:
        return
    statement = _rows_statement(connection.dialect.name, table, tuple(rows[0]), keys, None)
    connection.execute(statement, _each_row_params(rows))


def upsert_rows(
    connection: Any,
    table: Table,
    rows: Sequence[dict[str, Any]],
    keys: tuple[str, ...],
    refreshed: Sequence[str],
) -> None:
    """Insert ``rows``; a row whose primary key is stored gets its ``refreshed`` columns
    replaced instead. ``ON CONFLICT ... DO UPDATE`` on PostgreSQL and SQLite, ``ON
    DUPLICATE KEY UPDATE`` on MariaDB/MySQL (see ``upsert_grant``)."""
    if not rows:
        return
    statement = _rows_statement(
        connection.dialect.name, table, tuple(rows[0]), keys, tuple(refreshed)
    )
    connection.execute(statement, _each_row_params(rows))


def json_key_equals(
    session: Session, column: ColumnElement[Any], key: str, value: object
) -> ColumnElement[bool] | None:
    """A condition that a JSON object column's ``key`` holds exactly ``value`` (a string,
    an int, a bool), or None when this dialect cannot say so exactly in SQL (the caller
    then compares in Python).

    PostgreSQL (JSONB): ``column -> key = value::jsonb``, exact with types. SQLite:
    ``json_extract`` with ``json_type`` (json_extract alone reads ``true`` as 1).
    MariaDB/MySQL: the unquoted text with a binary collation (the connection's may be
    case-insensitive) and ``JSON_TYPE``; booleans there are left to Python.
    """
    if type(value) not in (str, int, bool) or '"' in key or "\\" in key:
        return None
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        return None
    dialect = session.connection().dialect.name
    path = f'$."{key}"'
    if dialect == "postgresql":
        encoded = json.dumps(value, ensure_ascii=False)
        return column.op("->")(literal(key, Text())) == sql_cast(
            literal(encoded, Text()), postgresql.JSONB()
        )
    if dialect == "sqlite":
        kind = func.json_type(column, path)
        if type(value) is bool:
            return kind == ("true" if value else "false")
        expected = "text" if type(value) is str else "integer"
        return and_(kind == expected, func.json_extract(column, path) == value)
    if dialect in ("mysql", "mariadb") and type(value) is not bool:
        extracted = func.json_extract(column, path)
        if type(value) is str:
            unquoted = func.json_unquote(extracted).collate("utf8mb4_bin")
            return and_(func.json_type(extracted) == "STRING", unquoted == value)
        return and_(func.json_type(extracted) == "INTEGER", extracted == value)
    return None


def json_object_entries(dialect_name: str, column: ColumnElement[Any]) -> Any | None:
    """The (``key``, ``value``) rows of a JSON object column of string values, as a
    table-valued function that one statement can join on (so a read needing the
    object's entries stays one statement, one snapshot); None where there is none.

    PostgreSQL: ``json_each_text`` (the column is JSON, not JSONB); its reads run in
    AUTOCOMMIT, a snapshot per statement. SQLite: ``json_each``; one statement there
    needs no read transaction either (SQLite has no LATERAL: see ``probe_per_row``).
    MariaDB/MySQL's read transactions are one snapshot already (REPEATABLE READ), and
    its ``JSON_TABLE`` walks arrays, not an object's keys.
    """
    if dialect_name == "postgresql":
        return func.json_each_text(column).table_valued("key", "value")
    if dialect_name == "sqlite":
        # Text that is not JSON (an out-of-band writer: SQLite's JSON is text) gives no
        # entries, rather than failing the statement with a bare "malformed JSON": the
        # caller decodes the column itself and names the corrupt row.
        valid = case((func.json_valid(column) == 1, column), else_=literal("{}"))
        return func.json_each(valid).table_valued("key", "value")
    return None


def probe_per_row(
    dialect_name: str, probe: Select[Any], name: str
) -> tuple[list[Any], Any, ColumnElement[bool]]:
    """The columns of ``probe`` (a select correlated to each row of an outer query, at
    most one row by its primary key), for the outer query to select, and what the
    outer query LEFT JOINs on for them, with its ON clause. No row: NULL columns.

    PostgreSQL: a LATERAL with ``LIMIT 1``; without the LIMIT the planner flattens it
    into a hash join over every row of the table the probe reads (for a LangGraph
    checkpoint, every value of the thread: 3 ms at 1,000 checkpoints, growing). SQLite
    has no LATERAL; an inner join there let its planner scan every value of the thread
    (35 times slower at 1,000 checkpoints), but it never reorders a LEFT JOIN: the
    probed table is joined on the probe's own conditions, one primary-key probe per
    outer row (a correlated scalar subquery per column probed once per column: a
    quarter more of SQLite's time for a checkpoint of three channels).
    """
    if dialect_name == "sqlite":
        (table,) = probe.columns_clause_froms
        condition = probe.whereclause
        if condition is None:
            raise ValueError("a probe is correlated to the outer row by its WHERE clause")
        return list(probe.selected_columns), table, condition
    lateral = probe.limit(1).lateral(name)
    return list(lateral.c), lateral, true()


_SESSIONS = cast(Table, AgentSession.__table__)
_TOUCH = (
    update(_SESSIONS)
    .where(_SESSIONS.c.id == bindparam("session_id"))
    .values(updated_at=bindparam("now", type_=_SESSIONS.c.updated_at.type))
)
_SESSION_BY_KEY: dict[str, Any] = {}
"""The statements of ``touch_session_by_key`` by dialect, built on first use."""


def touch_session_by_key(
    connection: Any, key_hash: str, key: str, now: datetime, every: timedelta
) -> str | None:
    """The id of the session with external key ``key`` (its scope's hash ``key_hash``),
    its ``updated_at`` set to ``now`` when older than ``every``; None when there is none.

    Setting ``updated_at`` at every call rewrote the session row and its four
    ``updated_at`` indexes: on SQLite about eleven more WAL pages per write (a LangGraph
    ``put_writes`` wrote three times the pages of ``SqliteSaver``'s), on PostgreSQL a
    new row version with an entry in each index. So the row is read first and written
    only when stale. On PostgreSQL the read locks what the UPDATE locked (``FOR KEY
    SHARE``), so a write racing a ``delete`` of the session still waits for it and
    then finds none (and creates one) instead of failing its foreign key; writers of
    one session do not wait for each other (an UPDATE of columns outside any unique key
    takes ``FOR NO KEY UPDATE``, which does not conflict with it). MariaDB/MySQL read
    without a lock, as before: a locking read of a key not stored yet takes a gap lock
    at REPEATABLE READ, which deadlocked two first writers of one thread (in the tests)
    against the creators' named lock (``creators_take_turns``); the foreign key check of the
    write takes the row's shared lock. SQLite's write transaction (``BEGIN
    IMMEDIATE``) holds the database's write lock already.
    """
    dialect = connection.dialect.name
    statement = _SESSION_BY_KEY.get(dialect)
    if statement is None:
        statement = select(_SESSIONS.c.id, _SESSIONS.c.updated_at).where(
            _SESSIONS.c.external_key_hash == bindparam("hash"),
            _SESSIONS.c.external_key == bindparam("key"),
        )
        if dialect == "postgresql":
            statement = statement.with_for_update(read=True, key_share=True)
        _SESSION_BY_KEY[dialect] = statement
    row = connection.execute(statement, {"hash": key_hash, "key": key}).first()
    if row is None:
        return None
    found = str(row[0])
    if row[1] is None or row[1] < now - every:
        connection.execute(_TOUCH, {"session_id": found, "now": now})
    return found


_SESSION_IF_ABSENT: dict[str, Any] = {}
"""The statements of ``insert_session_if_absent`` by dialect, built on first use."""


def insert_session_if_absent(connection: Any, values: dict[str, Any]) -> bool | None:
    """Insert a session row (``values``: every column) unless it collides with a stored
    session on any unique key (its id, its external key); whether it was inserted.

    PostgreSQL and SQLite: ``ON CONFLICT DO NOTHING`` with no conflict target, one
    prebuilt statement that leaves the transaction usable whichever key collides (a
    failed INSERT needed a SAVEPOINT around it, two more round trips), and that runs on
    driver SQL too. None on MariaDB/MySQL: a collision there cannot be told from an
    insert (``ON DUPLICATE KEY UPDATE`` counts the found row as changed under the
    FOUND_ROWS client flag, and ``INSERT IGNORE`` turns other errors into warnings), so
    the caller inserts in a savepoint instead. ``connection``: a Connection, or a
    ``_driver.DriverConnection``."""
    dialect = connection.dialect.name
    if dialect not in ("postgresql", "sqlite"):
        return None
    statement = _SESSION_IF_ABSENT.get(dialect)
    if statement is None:
        insert = postgresql_insert if dialect == "postgresql" else sqlite_insert
        statement = _SESSION_IF_ABSENT[dialect] = (
            insert(_SESSIONS)
            .values(_session_binds())
            .on_conflict_do_nothing()
            # SQLAlchemy reports an INSERT's rowcount only when asked to keep it.
            .execution_options(preserve_rowcount=True)
        )
    return bool(connection.execute(statement, _session_params(values)).rowcount == 1)


def _session_binds() -> dict[str, Any]:
    """A session row's columns as bind parameters (``s_`` and the column's key)."""
    return {name: bindparam(f"s_{name}", type_=column.type) for name, column in _SESSIONS.c.items()}


def _session_params(values: dict[str, Any]) -> dict[str, Any]:
    """The parameters of ``_session_binds`` for a row's column values."""
    return {f"s_{column.key}": values[column.key] for column in _SESSIONS.c}


_BY_SESSION_KEY: dict[tuple[Any, ...], Any] = {}
"""The statements of ``insert_for_session_key`` and ``insert_for_new_session`` by
shape, built on first use."""


def insert_for_session_key(
    connection: Any,
    key: tuple[str, str],
    touch: tuple[datetime, timedelta],
    missing: tuple[Table, Sequence[dict[str, Any]], tuple[str, ...]],
    upserted: tuple[Table, Sequence[dict[str, Any]], tuple[str, ...], Sequence[str]],
) -> bool | None:
    """On PostgreSQL: ``insert_missing`` of ``missing`` and ``upsert_rows`` of
    ``upserted`` (their rows without a ``session_id``) for the session whose external
    key is ``key`` (its scope's hash, the key), its ``updated_at`` set as
    ``touch_session_by_key`` does (now, every), in one statement; whether that session
    exists (False: nothing was written). None on other dialects: the caller finds the
    session first (``touch_session_by_key``) and writes after.

    One statement is one round trip, and atomic by itself, so a ledger's call needs no
    BEGIN and COMMIT around it (PostgreSQL at READ COMMITTED, ``_driver``): four round
    trips become one. The session is read ``FOR KEY SHARE``, as ``touch_session_by_key``
    reads it, so a write racing a delete of the session waits for it and finds none.
    Data-modifying CTEs run whether or not the statement refers to them.
    """
    if not stores_for_session(connection.dialect.name):
        return None
    now, every = touch
    params: dict[str, Any] = {"hash": key[0], "key": key[1], "now": now, "stale": now - every}
    return _store_for_session(connection, False, params, missing, upserted)


def insert_for_new_session(
    connection: Any,
    session: dict[str, Any],
    missing: tuple[Table, Sequence[dict[str, Any]], tuple[str, ...]],
    upserted: tuple[Table, Sequence[dict[str, Any]], tuple[str, ...], Sequence[str]],
) -> bool | None:
    """On PostgreSQL: a new session row (``session``: every column) and
    ``insert_missing`` of ``missing`` and ``upsert_rows`` of ``upserted`` for it, in one
    statement; whether the session was created (False: a stored session has its id or
    its external key, and nothing was written). None on other dialects.

    A thread's first write, after ``insert_for_session_key`` found no session: one more
    round trip, in the driver's autocommit (``engine.ALONE_OPTION``), where creating
    the session in a transaction took four (BEGIN, its INSERT, the store, COMMIT). The
    stored rows are selected from the session INSERT's RETURNING; their foreign keys
    are checked at the statement's end, when the session row is there.
    """
    if not stores_for_session(connection.dialect.name):
        return None
    return _store_for_session(connection, True, _session_params(session), missing, upserted)


def stores_for_session(dialect_name: str) -> bool:
    """Whether ``insert_for_session_key`` and ``insert_for_new_session`` store in one
    statement on the dialect: PostgreSQL only, whose data-modifying CTEs can find or
    create the session and store the rows that refer to it together (SQLite and
    MariaDB/MySQL have no INSERT inside a WITH)."""
    return dialect_name == "postgresql"


def _store_for_session(
    connection: Any,
    new: bool,
    params: dict[str, Any],
    missing: tuple[Table, Sequence[dict[str, Any]], tuple[str, ...]],
    upserted: tuple[Table, Sequence[dict[str, Any]], tuple[str, ...], Sequence[str]],
) -> bool:
    """``insert_for_session_key`` (``new`` False) or ``insert_for_new_session``, their
    statement built once per shape; whether the session was found or created."""
    table, rows, keys = missing
    target, targets, target_keys, refreshed = upserted
    names = tuple(rows[0]) if rows else ()
    target_names = tuple(targets[0]) if targets else ()
    shape = (new, table.name, len(rows), names, target.name, len(targets), target_names)
    statement = _BY_SESSION_KEY.get(shape)
    if statement is None:
        statement = _BY_SESSION_KEY[shape] = _insert_for_session(
            new,
            (table, len(rows), names, keys),
            (target, len(targets), target_names, target_keys),
            tuple(refreshed),
        )
    params.update(_row_params(rows, names, "m"))
    params.update(_row_params(targets, target_names, "u"))
    return connection.execute(statement, params).first() is not None


def _thread_by_key() -> tuple[Any, Any]:
    """The stored session found by its key (``FOR KEY SHARE``), its ``updated_at``
    moved when stale: the ``thread`` CTE and the statement selecting its id."""
    thread = (
        select(_SESSIONS.c.id)
        .where(
            _SESSIONS.c.external_key_hash == bindparam("hash"),
            _SESSIONS.c.external_key == bindparam("key"),
        )
        .with_for_update(read=True, key_share=True)
        .cte("thread")
    )
    touched = (
        update(_SESSIONS)
        .where(
            _SESSIONS.c.id == select(thread.c.id).scalar_subquery(),
            _SESSIONS.c.updated_at < bindparam("stale", type_=_SESSIONS.c.updated_at.type),
        )
        .values(updated_at=bindparam("now", type_=_SESSIONS.c.updated_at.type))
        .cte("touched")
    )
    # Atomic by itself too: it runs in autocommit after a thread's first write guessed
    # the thread new and found it stored (``insert_for_new_session`` wrote nothing).
    return thread, select(thread.c.id).add_cte(touched).execution_options(**{ALONE_OPTION: True})


def _new_thread() -> tuple[Any, Any]:
    """A new session inserted unless a stored one has its id or key: the ``thread``
    CTE (its RETURNING) and the statement selecting its id, atomic by itself."""
    thread = (
        postgresql_insert(_SESSIONS)
        .values(_session_binds())
        .on_conflict_do_nothing()
        .returning(_SESSIONS.c.id)
        .cte("thread")
    )
    return thread, select(thread.c.id).execution_options(**{ALONE_OPTION: True})


def _union_bind(name: str, column: Column[Any]) -> ColumnElement[Any]:
    """The bind of ``column`` in a row of a ``UNION ALL``. PostgreSQL types a union's
    column from its rows, and a NULL sent without a type (psycopg sends None so) counts
    as text: rows whose every blob is NULL made a text column, which cannot be assigned
    to BYTEA. So a nullable column that is not a string is cast to its type; strings
    are not (text assigns to VARCHAR, and a cast to VARCHAR(n) would cut silently)."""
    bind = bindparam(name, type_=column.type)
    if column.nullable and not isinstance(column.type, String):
        return sql_cast(bind, column.type)
    return bind


def _insert_for_session(
    new: bool,
    missing: tuple[Table, int, tuple[str, ...], tuple[str, ...]],
    upserted: tuple[Table, int, tuple[str, ...], tuple[str, ...]],
    refreshed: tuple[str, ...],
) -> Any:
    """The statement of ``_store_for_session``: the rows' INSERTs as CTEs selecting the
    session's id from ``thread``, found by its key or new."""
    thread, statement = _new_thread() if new else _thread_by_key()
    for (table, count, names, keys), prefix, replaced in (
        (missing, "m", None),
        (upserted, "u", refreshed),
    ):
        if not count:
            continue
        rows = [
            select(
                thread.c.id,
                *(_union_bind(f"{prefix}{i}_{name}", table.c[name]).label(name) for name in names),
            )
            for i in range(count)
        ]
        source = rows[0] if count == 1 else union_all(*rows)
        insert = postgresql_insert(table).from_select(["session_id", *names], source)
        if replaced is None:
            insert = insert.on_conflict_do_nothing(index_elements=keys)
        else:
            insert = insert.on_conflict_do_update(
                index_elements=keys, set_={name: insert.excluded[name] for name in replaced}
            )
        statement = statement.add_cte(insert.cte(f"stored_{prefix}"))
    return statement
