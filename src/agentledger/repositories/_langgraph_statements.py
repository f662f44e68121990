"""The statements of LangGraph's storage that find or create a thread's session and
store its rows in one round trip: the session found by its key and touched when
stale, and on PostgreSQL (``Capabilities.dml_in_cte``) the session and the rows that
refer to it in one statement, atomic by itself."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Column, ColumnElement, String, Table, bindparam, select, union_all, update
from sqlalchemy import cast as sql_cast
from sqlalchemy.dialects.postgresql import insert as postgresql_insert

from .._dialects import capabilities
from ..engine import ALONE_OPTION
from ..models import AgentSession
from ._session_row import session_binds, session_params
from ._statements import row_params

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
        if capabilities(dialect).key_share_locks:
            statement = statement.with_for_update(read=True, key_share=True)
        _SESSION_BY_KEY[dialect] = statement
    row = connection.execute(statement, {"hash": key_hash, "key": key}).first()
    if row is None:
        return None
    found = str(row[0])
    if row[1] is None or row[1] < now - every:
        connection.execute(_TOUCH, {"session_id": found, "now": now})
    return found


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
    return _store_for_session(connection, True, session_params(session), missing, upserted)


def stores_for_session(dialect_name: str) -> bool:
    """Whether ``insert_for_session_key`` and ``insert_for_new_session`` store in one
    statement on the dialect: PostgreSQL only, whose data-modifying CTEs can find or
    create the session and store the rows that refer to it together (SQLite and
    MariaDB/MySQL have no INSERT inside a WITH)."""
    return capabilities(dialect_name).dml_in_cte


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
    params.update(row_params(rows, names, "m"))
    params.update(row_params(targets, target_names, "u"))
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
        .values(session_binds())
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
