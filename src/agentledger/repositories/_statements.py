"""Statement builders the repositories share, each differing by database only through
``_dialects.Capabilities``: insert-if-absent and upsert of rows, JSON from text, a
JSON key's exact match, a JSON object's entries as rows, probes per row, snapshot
reads, and the named lock creators of one row take turns under."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, cast

from sqlalchemy import (
    JSON,
    ColumnElement,
    Connection,
    Executable,
    Insert,
    Select,
    Table,
    Text,
    and_,
    bindparam,
    case,
    false,
    func,
    literal,
    or_,
    select,
    text,
    true,
    tuple_,
    update,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Session

from .._checks import after_keyset
from .._dialects import Capabilities, capabilities
from .._translate import is_unique_violation
from ..engine import read_only_transaction
from ..errors import DatabaseLockedError

if TYPE_CHECKING:
    from ._base import Executor


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

    A named lock belongs to the server session, not to the transaction: a rollback
    keeps it, and a pooled connection would carry it to its next user while every
    other creator of the row waited out its timeout. So after a database failure
    inside the turn (a deadlock, a lock wait that ran out, a Galera node aborting the
    transaction: the server may have rolled the transaction back, and SQLAlchemy may
    refuse any statement until the caller rolls back), and after a release that
    fails, the connection is invalidated: it is closed, the server ends the session
    and frees the lock with it, and the pool connects anew. The failure itself is
    what the caller sees (a deadlock: ``ConflictError("serialization")``, retried).
    """
    if not capabilities(connection.dialect).gap_locks:
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
    except sa_exc.SQLAlchemyError as failure:
        connection.invalidate(failure)
        raise
    except BaseException:
        _release(connection, name, after_failure=True)
        raise
    _release(connection, name)


_RELEASE_LOCK = text("SELECT RELEASE_LOCK(:name)")


def _release(connection: Connection, name: str, *, after_failure: bool = False) -> None:
    """Release the named lock ``name``; if that fails, invalidate ``connection`` and
    raise why (``after_failure``: the failure being raised already is the one the
    caller sees)."""
    try:
        connection.execute(_RELEASE_LOCK, {"name": name})
    except Exception as failure:
        connection.invalidate(failure)
        if not after_failure:
            raise


_LAST_INSERT_ID = select(func.last_insert_id())

CounterForm = Literal["returning", "last_insert_id", "read_back"]
"""How an UPDATE that moves a counter hands it back (``counter_form``)."""


def counter_form(found: Capabilities) -> CounterForm:
    """How a counter an UPDATE moved is read: from its RETURNING (PostgreSQL, SQLite),
    through ``LAST_INSERT_ID(expr)`` (MariaDB/MySQL), else read back from its row."""
    if found.update_returning:
        return "returning"
    return "last_insert_id" if found.last_insert_id else "read_back"


def counter_after_update(
    connection: Connection,
    result: Any,
    form: CounterForm,
    read_back: Select[Any],
    params: dict[str, Any],
) -> int | None:
    """The counter an UPDATE of one row moved, or None when it matched no row: read
    from its RETURNING, or from ``LAST_INSERT_ID()`` on the same connection, or by
    ``read_back`` (a SELECT of the counter, run with ``params``) under the lock the
    UPDATE took; each still inside the transaction."""
    if form == "returning":
        row = result.first()
        return None if row is None else int(row[0])
    if result.rowcount == 0:
        return None
    if form == "last_insert_id":
        return int(connection.execute(_LAST_INSERT_ID).scalar_one())
    return int(connection.execute(read_back, params).scalar_one())


def returns_from_update(session: Session) -> bool:
    """Whether a versioned ORM UPDATE of a session row can also return its columns.

    PostgreSQL and SQLite have ``UPDATE ... RETURNING`` and still report the rows the
    UPDATE matched, which the version check needs; the write then needs no SELECT to
    hand back the fresh record. MariaDB/MySQL have no UPDATE RETURNING: a SELECT reads
    the row back, in the same transaction, under the lock the UPDATE took.
    """
    return capabilities(session.get_bind().dialect).update_returning


def appends_in_one_statement(session: Session) -> bool:
    """Whether an append can write the session row and insert its messages in one
    statement (``_session_row.write_versioned_and_insert``).

    PostgreSQL has data-modifying CTEs: the INSERT selects from the versioned UPDATE's
    RETURNING, so the messages are stored only when the revision matched, in one round
    trip. SQLite and MariaDB/MySQL have no DML inside WITH: an UPDATE, then an INSERT.
    """
    return capabilities(session.get_bind().dialect).dml_in_cte


def missing_row_lock_is_safe(session: Session) -> bool:
    """Whether a ``SELECT ... FOR UPDATE`` of a row that may be missing can come before
    inserting it: on PostgreSQL and SQLite a missing row locks nothing, so a merge into an
    existing row needs no INSERT attempt first; on MariaDB/MySQL it takes a gap lock, and
    two such transactions deadlock on their INSERTs (see ``insert_if_absent``)."""
    return not capabilities(session.connection().dialect).gap_locks


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
    found = capabilities(session.connection().dialect)
    statement = found.insert(table).values(values)
    if found.upsert == "on_conflict":
        session.execute(statement.on_conflict_do_nothing(index_elements=keys))
    elif found.upsert == "on_duplicate_key":
        session.execute(statement.on_duplicate_key_update({keys[0]: table.c[keys[0]]}))
    else:
        inserted_unless_stored(session.connection(), statement)


def inserted_unless_stored(executor: Executor, statement: Executable, params: Any = None) -> bool:
    """Run the INSERT ``statement`` inside a savepoint: True when it inserted, False
    when a stored row held its key (the savepoint is undone and the transaction goes
    on, where a failed statement would end PostgreSQL's). The portable spelling of an
    insert that meets a stored key (``Capabilities.upsert`` None): a concurrent
    inserter's uncommitted row makes this one wait for its commit, then fail, as an
    upsert would wait. Any other failure is raised. ``executor``: a Connection (driver
    SQL, which has no savepoints, is off where there is no upsert)."""
    connection = cast(Connection, executor)
    savepoint = connection.begin_nested()
    try:
        connection.execute(statement, params)
    except BaseException as error:
        _undo(savepoint, error)
        if isinstance(error, sa_exc.IntegrityError) and is_unique_violation(error):
            return False
        raise
    savepoint.commit()
    return True


def _undo(savepoint: Any, error: BaseException) -> None:
    """Roll ``savepoint`` back after ``error``. Where the server had rolled the whole
    transaction back (InnoDB after a deadlock), ROLLBACK TO answers that the savepoint
    does not exist (1305); that error is raised from ``error``, since an async driver
    raises it in a greenlet of its own, where ``error`` is not its context, and the
    error translation looks for what lost the transaction along the chain (a deadlock:
    a serialization conflict, retried)."""
    try:
        savepoint.rollback()
    except sa_exc.DBAPIError as gone:
        raise gone from error


def json_from_text(session: Session, json_text: str) -> ColumnElement[Any]:
    """A value for a JSON column from JSON text agentledger serialised (and measured)
    itself, so the column type does not serialise it a second time.

    The engine's default encoder escapes every non-ASCII character (up to six bytes
    for one), so a payload checked at its limit could grow 3.5 times on MariaDB after
    the driver's own escaping, past the 16 MiB packet. PostgreSQL needs the text cast
    to ``json`` (its drivers send the parameter typed as text), and so does a dialect
    agentledger was not tested on; SQLite and MariaDB keep JSON as text, and MariaDB
    has no CAST to JSON.
    """
    value = literal(json_text, Text())
    if capabilities(session.connection().dialect).json_needs_cast:
        return sql_cast(value, JSON())
    return value


_JSON_TEXT_INSERTS: dict[tuple[str, str, bool], Insert] = {}


def insert_json_text(connection: Connection, table: Table, column: str) -> Insert:
    """An INSERT into ``table`` whose ``column`` takes JSON text agentledger serialised
    itself (the parameter ``b_<column>``; see ``json_from_text``), the other columns
    from the execute parameters. Built once per table and dialect: cast to ``json`` on
    PostgreSQL, the text itself elsewhere."""
    cast_to_json = capabilities(connection.dialect).json_needs_cast
    key = (table.name, column, cast_to_json)
    statement = _JSON_TEXT_INSERTS.get(key)
    if statement is None:
        value: ColumnElement[Any] = bindparam(f"b_{column}", type_=Text())
        if cast_to_json:
            value = sql_cast(value, JSON())
        statement = _JSON_TEXT_INSERTS.setdefault(key, table.insert().values({column: value}))
    return statement


def snapshot_read_options(dialect_name: str) -> dict[str, Any]:
    """Engine options for one long read transaction that must see a single snapshot
    (an export, the source side of a copy), read page by page.

    PostgreSQL's default READ COMMITTED takes a new snapshot per statement, so later
    pages could disagree with earlier ones; REPEATABLE READ keeps the first (and a
    read-only transaction there never fails to serialize; ``begin_snapshot`` makes it
    read-only). MariaDB/MySQL's default REPEATABLE READ and a SQLite read transaction
    (WAL) already read one snapshot.
    """
    if capabilities(dialect_name).snapshot_read == "isolation_option":
        return {"isolation_level": "REPEATABLE READ"}
    return {}


def stream_options(connection: Connection, partition: int) -> dict[str, Any]:
    """Connection options that fetch a large answer ``partition`` rows at a time, from a
    server-side cursor where the driver has one (psycopg, asyncpg, PyMySQL, aiomysql).

    PostgreSQL declares server-side cursors only inside a transaction, and a ledger's
    own read calls there run in AUTOCOMMIT (``engine.read_only_options``): those fetch
    the answer at once. Inside a unit of work every dialect streams.
    """
    if (
        capabilities(connection.dialect).cursors_need_transaction
        and connection.get_execution_options().get("isolation_level") == "AUTOCOMMIT"
    ):
        return {}
    return {"yield_per": partition}


def begin_snapshot(connection: Connection) -> None:
    """Begin a read-only unit of work's transaction where its options cannot.

    PostgreSQL gets REPEATABLE READ from the connection options
    (``snapshot_read_options``: the snapshot is the first statement's) and READ ONLY
    for this transaction alone (``engine.read_only_transaction``: SQLAlchemy's own
    option would leave the connection beginning READ WRITE, which a hot standby
    refuses). SQLite's deferred BEGIN reads one snapshot from its first read (WAL).
    MariaDB/MySQL have no such option in SQLAlchemy: this sends the statements that
    start a read-only transaction on a snapshot taken now (at REPEATABLE READ whatever
    the session's level, since a consistent snapshot means nothing at READ COMMITTED;
    the SET is skipped, a round trip less, when the connection is at REPEATABLE READ
    already, the server's default). A write inside it fails on the server too (errno
    1792, SQLSTATE 25006).
    """
    how = capabilities(connection.dialect).snapshot_read
    if how == "isolation_option":
        read_only_transaction(connection)
    elif how == "consistent_snapshot":
        level = connection.get_execution_options().get("isolation_level")
        if (level or connection.default_isolation_level) != "REPEATABLE READ":
            connection.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        connection.exec_driver_sql("START TRANSACTION READ ONLY, WITH CONSISTENT SNAPSHOT")


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
    found = capabilities(dialect)
    if found.upsert == "on_conflict":
        statement = found.insert(table).values(row)
        if refreshed is None:
            statement = statement.on_conflict_do_nothing(index_elements=keys)
        else:
            statement = statement.on_conflict_do_update(
                index_elements=keys, set_={name: statement.excluded[name] for name in refreshed}
            )
    else:
        statement = found.insert(table).values(row)
        if refreshed is None:
            statement = statement.on_duplicate_key_update({keys[0]: table.c[keys[0]]})
        else:
            statement = statement.on_duplicate_key_update(
                {name: statement.inserted[name] for name in refreshed}
            )
    _PREBUILT[cache_key] = statement
    return statement


def row_params(
    rows: Sequence[dict[str, Any]], names: tuple[str, ...], prefix: str
) -> dict[str, Any]:
    """The parameters of a statement of ``rows`` bound as ``{prefix}{index}_{column}``."""
    return {f"{prefix}{i}_{name}": row[name] for i, row in enumerate(rows) for name in names}


def _each_row_params(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The executemany parameters of ``_rows_statement`` for ``rows``."""
    return [{f"r_{name}": value for name, value in row.items()} for row in rows]


def insert_missing(
    connection: Executor, table: Table, rows: Sequence[dict[str, Any]], keys: tuple[str, ...]
) -> None:
    """Insert ``rows``, leaving alone each one whose primary key is already stored:
    ``insert_if_absent`` for many rows at once. ``ON CONFLICT DO NOTHING`` on PostgreSQL
    and SQLite; MariaDB/MySQL's ``INSERT IGNORE`` would hide other errors too, so a no-op
    ``ON DUPLICATE KEY UPDATE`` there. ``connection``: a Connection, or a
    ``_driver.DriverConnection`` (prebuilt statements run on both)."""
    if not rows:
        return
    if capabilities(connection.dialect).upsert is None:
        _portable_rows(connection, table, rows, keys, None)
        return
    statement = _rows_statement(connection.dialect.name, table, tuple(rows[0]), keys, None)
    connection.execute(statement, _each_row_params(rows))


def upsert_rows(
    connection: Executor,
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
    if capabilities(connection.dialect).upsert is None:
        _portable_rows(connection, table, rows, keys, tuple(refreshed))
        return
    statement = _rows_statement(
        connection.dialect.name, table, tuple(rows[0]), keys, tuple(refreshed)
    )
    connection.execute(statement, _each_row_params(rows))


def _portable_rows(
    connection: Executor,
    table: Table,
    rows: Sequence[dict[str, Any]],
    keys: tuple[str, ...],
    refreshed: tuple[str, ...] | None,
) -> None:
    """``insert_missing`` (``refreshed`` None) and ``upsert_rows`` without an upsert
    (the portable profile): each row inserted in a savepoint; a row whose key is stored
    is left alone, or has its ``refreshed`` columns updated (an UPDATE first, the
    INSERT only where it matched nothing, then the UPDATE again where a concurrent
    inserter won the INSERT). Where the database takes gap locks (InnoDB), the INSERT
    comes first, and the UPDATE only where the key was stored: an UPDATE of a missing
    key locks the gap it would go in, and writers of new keys in one gap (a thread's
    next checkpoints, whose ids grow) then deadlock on their INSERTs, over and over."""
    insert_row = table.insert()
    insert_first = capabilities(connection.dialect).gap_locks
    for row in rows:
        if refreshed is None:
            inserted_unless_stored(connection, insert_row, row)
            continue
        matching = and_(*(table.c[key] == row[key] for key in keys))
        refresh = update(table).where(matching).values({name: row[name] for name in refreshed})
        if not insert_first and connection.execute(refresh).rowcount:
            continue
        if not inserted_unless_stored(connection, insert_row, row):
            connection.execute(refresh)


def rows_in(
    dialect: Dialect | str,
    columns: Sequence[ColumnElement[Any]],
    rows: Iterable[Sequence[Any]],
) -> ColumnElement[bool]:
    """``(columns) IN (rows)``; where the database compares no row values
    (``Capabilities.row_values``), the rows grouped by all but their last value, ``(a =
    1 AND b IN (...)) OR ...``. No rows: a condition no row meets."""
    wanted = [tuple(row) for row in rows]
    if capabilities(dialect).row_values:
        return tuple_(*columns).in_(wanted)
    *leading, last = columns
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for row in wanted:
        groups.setdefault(row[:-1], []).append(row[-1])
    return or_(
        false(),
        *(
            and_(*(c == v for c, v in zip(leading, prefix, strict=True)), last.in_(values))
            for prefix, values in groups.items()
        ),
    )


def rows_before(
    dialect: Dialect | str, columns: Sequence[ColumnElement[Any]], position: Sequence[Any]
) -> ColumnElement[bool]:
    """Rows before ``position`` in the order of ``columns``, each descending (a keyset's
    next page): ``(columns) < (position)`` where the database compares row values
    (``Capabilities.row_values``), else spelled out column by column
    (``_checks.after_keyset``), ``c1 <= :v1 AND (c1 < :v1 OR ...)``."""
    if capabilities(dialect).row_values:
        return tuple_(*columns) < tuple_(*position)
    return after_keyset(columns, position, descending=True)


def json_key_equals(
    dialect: Dialect, column: ColumnElement[Any], key: str, value: object
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
    match = capabilities(dialect).json_key_match
    path = f'$."{key}"'
    if match == "jsonb":
        encoded = json.dumps(value, ensure_ascii=False)
        return column.op("->")(literal(key, Text())) == sql_cast(
            literal(encoded, Text()), postgresql.JSONB()
        )
    if match == "json_type":
        kind = func.json_type(column, path)
        if type(value) is bool:
            return kind == ("true" if value else "false")
        expected = "text" if type(value) is str else "integer"
        return and_(kind == expected, func.json_extract(column, path) == value)
    if match == "json_type_without_bool" and type(value) is not bool:
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
    rows = capabilities(dialect_name).json_object_rows
    if rows == "json_each_text":
        return func.json_each_text(column).table_valued("key", "value")
    if rows == "json_each":
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
    if not capabilities(dialect_name).lateral:
        (table,) = probe.columns_clause_froms
        condition = probe.whereclause
        if condition is None:
            raise ValueError("a probe is correlated to the outer row by its WHERE clause")
        return list(probe.selected_columns), table, condition
    lateral = probe.limit(1).lateral(name)
    return list(lateral.c), lateral, true()
