"""The statements of LangGraph's storage, prebuilt once: a checkpoint's row with its
channel values and pending writes in one statement where the database can, pages of
checkpoints newest first, and a thread's session found (touched when stale) or
created together with its rows in one round trip (PostgreSQL)."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import (
    Column,
    ColumnElement,
    CompoundSelect,
    Integer,
    Select,
    String,
    Table,
    Text,
    and_,
    bindparam,
    literal,
    null,
    select,
    true,
    tuple_,
    type_coerce,
    union_all,
    update,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects.postgresql import insert as postgresql_insert

from ..._dialects import capabilities, locking
from ..._translate import is_foreign_key_violation
from ...engine import ALONE_OPTION
from ...errors import AgentLedgerError
from ...models import AgentSession
from .._session_row import SESSIONS, session_binds, session_params
from .._statements import (
    json_object_entries,
    probe_per_row,
    row_params,
    rows_before,
    rows_in,
)
from .values import (
    BLOBS,
    CHECKPOINTS,
    WRITES,
    _in_langgraph_order,
    _Position,
    _stored_write,
    _unpacked,
    _Values,
    _Writes,
)

if TYPE_CHECKING:
    from .._base import Executor

_Missing = tuple[Table, list[dict[str, Any]], tuple[str, ...]]
"""Rows to insert where absent: (table, rows without a ``session_id``, their key)."""


_Upserted = tuple[Table, list[dict[str, Any]], tuple[str, ...], list[str]]
"""Rows to upsert: (table, rows without a ``session_id``, their key, refreshed columns)."""


PAGE = 100
"""Checkpoints read per query by ``list`` (one transaction each)."""


_CHECKPOINT_KEY = ("session_id", "checkpoint_ns", "checkpoint_id")


_BY_KEY = and_(
    SESSIONS.c.external_key_hash == bindparam("hash"), SESSIONS.c.external_key == bindparam("key")
)


_SESSION_OF = select(SESSIONS.c.id).where(_BY_KEY)


_ROW = select(
    SESSIONS.c.external_key.label("thread_id"),
    CHECKPOINTS.c.session_id,
    CHECKPOINTS.c.checkpoint_ns,
    CHECKPOINTS.c.checkpoint_id,
    CHECKPOINTS.c.parent_checkpoint_id,
    CHECKPOINTS.c.type,
    CHECKPOINTS.c.checkpoint,
    CHECKPOINTS.c.channel_versions,
    CHECKPOINTS.c.metadata,
).join(SESSIONS, SESSIONS.c.id == CHECKPOINTS.c.session_id)


def threads_in_scope(app_name: str | None, user_id: str | None) -> ColumnElement[bool]:
    """The sessions that are threads of the scope (``app_name``, ``user_id``; None
    matches NULL): those with an external key, the thread id."""
    app = SESSIONS.c.app_name.is_(None) if app_name is None else SESSIONS.c.app_name == app_name
    user = SESSIONS.c.user_id.is_(None) if user_id is None else SESSIONS.c.user_id == user_id
    return and_(app, user, SESSIONS.c.external_key.is_not(None))


_THREAD = SESSIONS.alias("thread")


def _thread_session(key_hash: Any, key: Any) -> Any:
    """The id of the session with external key ``key`` (its scope's hash ``key_hash``),
    as a scalar subquery on a sessions alias of its own (see ``_IN_NAMESPACE``)."""
    found = select(_THREAD.c.id).where(
        _THREAD.c.external_key_hash == key_hash, _THREAD.c.external_key == key
    )
    return found.scalar_subquery()


_THREAD_SESSION = _thread_session(bindparam("hash"), bindparam("key"))


# The thread's session found first, on its own: its id is then a constant of the
# checkpoints' primary-key range, which is read newest first and stops at the first row.
# Joined to the key look-up instead, PostgreSQL read every checkpoint of the namespace
# and sorted them (a thread's length in buffers for its latest checkpoint).
_IN_NAMESPACE = _ROW.where(
    CHECKPOINTS.c.session_id == _THREAD_SESSION, CHECKPOINTS.c.checkpoint_ns == bindparam("ns")
)


_LATEST = _IN_NAMESPACE.order_by(CHECKPOINTS.c.checkpoint_id.desc()).limit(1)


_ONE = _IN_NAMESPACE.where(CHECKPOINTS.c.checkpoint_id == bindparam("id"))


_PAIR = (BLOBS.c.channel, BLOBS.c.version)
"""A channel value's key within its thread and namespace."""


def _stored_values(pairs: ColumnElement[bool]) -> tuple[ColumnElement[bool], ...]:
    """The values of one place (``session_id``, ``ns``) stored (not ``empty``) whose
    (channel, version) meet ``pairs``."""
    return (
        BLOBS.c.session_id == bindparam("session_id"),
        BLOBS.c.checkpoint_ns == bindparam("ns"),
        pairs,
        BLOBS.c.type != "empty",
    )


def _values_of(pairs: ColumnElement[bool]) -> Select[Any]:
    """The values of ``_stored_values``, read."""
    return select(BLOBS.c.channel, BLOBS.c.version, BLOBS.c.type, BLOBS.c.blob).where(
        *_stored_values(pairs)
    )


_WRITES_OF_ONE = (
    WRITES.c.session_id == bindparam("session_id"),
    WRITES.c.checkpoint_ns == bindparam("ns"),
    WRITES.c.checkpoint_id == bindparam("id"),
)
"""The pending writes of one checkpoint (``session_id``, ``ns``, ``id``)."""


_WRITES_OF = select(
    WRITES.c.task_id,
    WRITES.c.idx,
    WRITES.c.channel,
    WRITES.c.type,
    WRITES.c.blob,
    WRITES.c.task_path,
).where(*_WRITES_OF_ONE)


_CHECKPOINT_PART, _VALUE_PART, _WRITE_PART = 0, 1, 2
"""What a row of a read of checkpoints with their parts is (its ``part`` column): small
integers, the same object in every row, where a text label was a new string per row."""


_AT_PART, _AT_CHANNEL, _AT_SESSION, _AT_NS, _AT_VERSION, _AT_TASK = range(6)


_AT_TYPE, _AT_BLOB, _AT_TASK_PATH, _AT_IDX = range(6, 10)


_AT_CHECKPOINT = _AT_VERSION
"""Where a value or write row of a read of checkpoints with their parts
(``_checkpoint_with_parts``, ``_PARTS_OF_ONE``) has each of its columns: the channel;
the session and namespace (in a page of ``list``); the value's version, or the write's
checkpoint id (in a page); the write's task id; the type tag and bytes; the write's task
path and index. The checkpoint rows of ``_checkpoint_with_parts`` put theirs in the same
positions (thread id, session, namespace, id, parent id, type, bytes, versions, none,
metadata), read by name. Each column of each row costs the driver a value to make, a
NULL too (sqlite3: about 50 ns), and a checkpoint's pending writes are most of a read's
rows: sharing the positions left a write row 4 columns of NULL where it had 9."""


def _parts_of_one(pairs: ColumnElement[bool]) -> CompoundSelect[Any]:
    """One checkpoint's channel values (those whose (channel, version) meet ``pairs``)
    and pending writes in one query (one round trip)."""
    return union_all(
        select(
            literal(_VALUE_PART).label("part"),
            BLOBS.c.channel,
            # Typed as the writes' columns they head (no SQL changes): their values are
            # read through the type, which on Oracle turns its stand-in back into ''.
            type_coerce(null(), WRITES.c.session_id.type).label("session_id"),
            type_coerce(null(), WRITES.c.checkpoint_ns.type).label("checkpoint_ns"),
            BLOBS.c.version,
            type_coerce(null(), WRITES.c.task_id.type).label("task_id"),
            BLOBS.c.type,
            BLOBS.c.blob,
            type_coerce(null(), WRITES.c.task_path.type).label("task_path"),
            sql_cast(null(), Integer).label("idx"),
        ).where(*_stored_values(pairs)),
        select(
            literal(_WRITE_PART),
            WRITES.c.channel,
            null(),
            null(),
            null(),
            WRITES.c.task_id,
            WRITES.c.type,
            WRITES.c.blob,
            WRITES.c.task_path,
            WRITES.c.idx,
        ).where(*_WRITES_OF_ONE),
    )


_PAIRS_READS: dict[Any, Any] = {
    build: build(tuple_(*_PAIR).in_(bindparam("pairs", expanding=True)))
    for build in (_values_of, _parts_of_one)
}
"""``_values_of`` and ``_parts_of_one`` built once, the pairs one expanding parameter
of row values, for the databases that compare them."""


def read_of_pairs(
    dialect_name: str,
    build: Callable[[ColumnElement[bool]], Any],
    pairs: Sequence[tuple[str, str]],
) -> tuple[Any, dict[str, Any]]:
    """``build`` (``_values_of``, ``_parts_of_one``) for the (channel, version)
    ``pairs``, with the parameters that name them: the statement built once, the pairs
    one expanding parameter, where the database compares row values
    (``Capabilities.row_values``); elsewhere built for these pairs (``rows_in``)."""
    if capabilities(dialect_name).row_values:
        return _PAIRS_READS[build], {"pairs": list(pairs)}
    return build(rows_in(dialect_name, _PAIR, pairs)), {}


def _checkpoint_with_parts(query: Any, dialect_name: str, *, page: bool) -> Any:
    """``query``'s checkpoints (one, or a ``page`` of ``list``) with their channel values
    and pending writes, in one statement: a single snapshot, so a concurrent prune or
    delete cannot leave a checkpoint without the values it names. The values are
    probed by the entries of each one's channel_versions
    (``_statements.json_object_entries``, ``probe_per_row``); None where the dialect
    cannot make those. Rows: a ``_CHECKPOINT_PART`` per checkpoint, and ``_VALUE_PART``
    and ``_WRITE_PART`` rows naming theirs (``_parts_of_many`` reads them); of one
    checkpoint (not a ``page``), those leave out its place, known from its row: a
    pending write's row is most of a read's rows, and each text column of each row is
    a new string for the driver to make."""
    head = query.cte("head")
    versions = json_object_entries(dialect_name, head.c.channel_versions)
    if versions is None:
        return None
    # The (channel, version) pairs the checkpoints name, a page's each once: its
    # checkpoints share most of theirs (a channel no step changed), so each value is
    # probed and sent once, by its primary key, whatever the thread's length (one
    # checkpoint's are distinct already: no DISTINCT, a tenth of SQLite's time).
    pairs = select(
        head.c.session_id,
        head.c.checkpoint_ns,
        versions.c.key.label("channel"),
        versions.c.value.label("version"),
    ).join_from(head, versions, true())
    wanted = (pairs.distinct() if page else pairs).subquery("wanted")
    value = select(BLOBS.c.type, BLOBS.c.blob).where(
        BLOBS.c.session_id == wanted.c.session_id,
        BLOBS.c.checkpoint_ns == wanted.c.checkpoint_ns,
        BLOBS.c.channel == wanted.c.channel,
        BLOBS.c.version == wanted.c.version,
        BLOBS.c.type != "empty",
    )
    (value_type, value_blob), probed, on = probe_per_row(dialect_name, value, "value")
    values_of = select(literal(1)).select_from(wanted).outerjoin(probed, on)

    def place(*columns: Any) -> builtins.list[Any]:
        return list(columns) if page else [null() for _ in columns]

    # The columns by position: see ``_AT_PART``.
    return union_all(
        select(
            literal(_CHECKPOINT_PART).label("part"),
            head.c.thread_id,
            head.c.session_id,
            head.c.checkpoint_ns,
            head.c.checkpoint_id,
            head.c.parent_checkpoint_id,
            head.c.type,
            head.c.checkpoint,
            # Sent as text, decoded once per checkpoint (``values.versions_of``): as JSON, the
            # type's reader ran on every value and write row too (NULL there), a fifth
            # of the Python time of a SQLite ``get``; and psycopg made a JSON loader per
            # column per call and decoded bytes, a tenth of a PostgreSQL ``get``.
            sql_cast(head.c.channel_versions, Text()).label("channel_versions"),
            # Typed: PostgreSQL types a UNION's branches pairwise, and two NULLs are text.
            sql_cast(null(), Integer).label("idx"),
            sql_cast(head.c.metadata, Text()).label("metadata"),
        ),
        values_of.with_only_columns(
            literal(_VALUE_PART),
            wanted.c.channel,
            *place(wanted.c.session_id, wanted.c.checkpoint_ns),
            wanted.c.version,
            null(),
            value_type,
            value_blob,
            null(),
            null(),
            null(),
            maintain_column_froms=False,
        ),
        select(
            literal(_WRITE_PART),
            WRITES.c.channel,
            *place(head.c.session_id, head.c.checkpoint_ns, head.c.checkpoint_id),
            WRITES.c.task_id,
            WRITES.c.type,
            WRITES.c.blob,
            WRITES.c.task_path,
            WRITES.c.idx,
            null(),
        ).join_from(
            head,
            WRITES,
            and_(
                WRITES.c.session_id == head.c.session_id,
                WRITES.c.checkpoint_ns == head.c.checkpoint_ns,
                WRITES.c.checkpoint_id == head.c.checkpoint_id,
            ),
        ),
    )


_ORDER = (CHECKPOINTS.c.checkpoint_id, CHECKPOINTS.c.checkpoint_ns, CHECKPOINTS.c.session_id)
"""The order of ``list``: newest checkpoint id first, then namespace and session."""


def _newest_first(ns_given: bool) -> builtins.list[Any]:
    """``_ORDER`` descending, without the namespace when the query fixes it: MariaDB
    does not drop a column compared to a parameter from ORDER BY, and sorted every
    checkpoint of the namespace for a page of ten."""
    return [column.desc() for column in _ORDER if not (ns_given and column is _ORDER[1])]


_PAGES: dict[tuple[str, bool, bool, bool, bool], Any] = {}
"""The one-statement pages of ``list`` by (dialect, ns, id, before, after given)."""


def _page_statement(
    dialect_name: str, ns: bool, checkpoint_id: bool, before: bool, after: bool
) -> Any:
    """A page of one thread's checkpoints (newest first, ``size`` of them) with their
    values and writes, in one statement built once per shape; None where the dialect
    cannot make it (``_checkpoint_with_parts``)."""
    key = (dialect_name, ns, checkpoint_id, before, after)
    if key not in _PAGES:
        id_type = CHECKPOINTS.c.checkpoint_id.type
        conditions = [CHECKPOINTS.c.session_id == _THREAD_SESSION]
        if ns:
            conditions.append(CHECKPOINTS.c.checkpoint_ns == bindparam("ns"))
        if checkpoint_id:
            conditions.append(CHECKPOINTS.c.checkpoint_id == bindparam("id"))
        if before:
            conditions.append(CHECKPOINTS.c.checkpoint_id < bindparam("before", type_=id_type))
        if after:
            position = (
                bindparam("after_id", type_=id_type),
                bindparam("after_ns", type_=CHECKPOINTS.c.checkpoint_ns.type),
                bindparam("after_session", type_=SESSIONS.c.id.type),
            )
            conditions.append(rows_before(dialect_name, _ORDER, position))
        query = (
            _ROW.where(*conditions)
            .order_by(*_newest_first(ns))
            .limit(bindparam("size", type_=Integer()))
        )
        _PAGES[key] = _checkpoint_with_parts(query, dialect_name, page=True)
    return _PAGES[key]


def _next(rows: Sequence[Any], size: int) -> _Position | None:
    """Where the next page starts after ``rows`` of a page of ``size`` (None: the end)."""
    if len(rows) < size:
        return None
    last = rows[-1]
    return _Position(last.checkpoint_id, last.checkpoint_ns, last.session_id)


_IN_ONE: dict[tuple[str, bool], Any] = {}
"""The one-statement reads of ``get`` by (dialect, latest), built on first use."""


def one_checkpoint_read(dialect_name: str, latest: bool) -> Any:
    """``get``'s read as one statement: the thread's newest checkpoint of a namespace
    (``latest``) or the one by its id, with its values and writes; built once per
    dialect, None where the dialect cannot make it (``_checkpoint_with_parts``)."""
    key = (dialect_name, latest)
    if key not in _IN_ONE:
        query = _LATEST if latest else _ONE
        _IN_ONE[key] = _checkpoint_with_parts(query, dialect_name, page=False)
    return _IN_ONE[key]


def _parts_of_many(
    rows: Sequence[Any], one: tuple[str, str, str] | None = None
) -> tuple[_Values, _Writes]:
    """The values and writes among the rows of ``_checkpoint_with_parts`` or
    ``_PARTS_OF_ONE`` (checkpoint rows left out), by checkpoint; writes in LangGraph's
    order. ``one``: the place (session, namespace, id) of the one checkpoint whose part
    rows leave theirs out. Read by position (``_AT_PART``): a read's rows are mostly
    pending writes, and this loop is most of its Python time."""
    values: _Values = {}
    writes: _Writes = {}
    for part in rows:
        kind = part[_AT_PART]
        if kind == _WRITE_PART:
            at = one or (part[_AT_SESSION], part[_AT_NS], part[_AT_CHECKPOINT])
            write = _stored_write(
                at,
                part[_AT_TASK],
                part[_AT_CHANNEL],
                part[_AT_TYPE],
                part[_AT_BLOB],
                part[_AT_TASK_PATH],
                part[_AT_IDX],
            )
            found = writes.get(at)
            if found is None:
                writes[at] = [write]
            else:
                found.append(write)
        elif kind == _VALUE_PART:
            kind_tag = part[_AT_TYPE]
            if kind_tag is not None and kind_tag != "empty":
                session_ns = one or (part[_AT_SESSION], part[_AT_NS])
                key = (session_ns[0], session_ns[1], part[_AT_CHANNEL], part[_AT_VERSION])
                values[key] = _unpacked(kind_tag, part[_AT_BLOB], BLOBS, key)
    for pending in writes.values():
        _in_langgraph_order(pending)
    return values, writes


# -- a thread's session and its rows in one round trip -------------------------------

_SESSIONS = cast(Table, AgentSession.__table__)


_TOUCH = (
    update(_SESSIONS)
    .where(_SESSIONS.c.id == bindparam("session_id"))
    .values(updated_at=bindparam("now", type_=_SESSIONS.c.updated_at.type))
)


_SESSION_BY_KEY: dict[str, Any] = {}
"""The statements of ``touch_session_by_key`` by dialect, built on first use."""


def touch_session_by_key(
    connection: Executor, key_hash: str, key: str, now: datetime, every: timedelta
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
    write takes the row's shared lock, and a delete of the session that ran first fails
    it (the call runs again: ``LangGraphRepository._store``). SQLite's write transaction (``BEGIN
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
            statement = locking(statement, read=True, key_share=True)
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
    connection: Executor,
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
    trips become one. A write racing a delete of the session waits for it and finds
    none: in a transaction the session is read ``FOR KEY SHARE``, as
    ``touch_session_by_key`` reads it; in the driver's autocommit the foreign key the
    delete left unmet undoes the statement, answered as no session (False).
    Data-modifying CTEs run whether or not the statement refers to them.
    """
    if not stores_for_session(connection.dialect.name):
        return None
    now, every = touch
    params: dict[str, Any] = {"hash": key[0], "key": key[1], "now": now, "stale": now - every}
    # In the driver's autocommit the statement is all of its transaction: a session
    # deleted between its read and its INSERTs fails their foreign key, which undoes
    # the statement, and that is answered as "no session". So the read takes no lock:
    # FOR KEY SHARE marks the row, which gives the statement a transaction id and its
    # COMMIT a WAL flush (120 to 220 us a write, measured). In a transaction a failed
    # statement would end it: there the read locks the row instead.
    atomic = bool(getattr(connection, "in_autocommit", False))
    try:
        return _store_for_session(connection, False, params, missing, upserted, locked=not atomic)
    except (sa_exc.IntegrityError, AgentLedgerError) as error:
        if atomic and is_foreign_key_violation(error):
            return False
        raise


def insert_for_new_session(
    connection: Executor,
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
    connection: Executor,
    new: bool,
    params: dict[str, Any],
    missing: tuple[Table, Sequence[dict[str, Any]], tuple[str, ...]],
    upserted: tuple[Table, Sequence[dict[str, Any]], tuple[str, ...], Sequence[str]],
    *,
    locked: bool = True,
) -> bool:
    """``insert_for_session_key`` (``new`` False) or ``insert_for_new_session``, their
    statement built once per shape; whether the session was found or created.
    ``locked``: a stored session is read ``FOR KEY SHARE``."""
    table, rows, keys = missing
    target, targets, target_keys, refreshed = upserted
    names = tuple(rows[0]) if rows else ()
    target_names = tuple(targets[0]) if targets else ()
    shape = (new, locked, table.name, len(rows), names, target.name, len(targets), target_names)
    statement = _BY_SESSION_KEY.get(shape)
    if statement is None:
        statement = _BY_SESSION_KEY[shape] = _insert_for_session(
            new,
            locked,
            (table, len(rows), names, keys),
            (target, len(targets), target_names, target_keys),
            tuple(refreshed),
        )
    params.update(row_params(rows, names, "m"))
    params.update(row_params(targets, target_names, "u"))
    return connection.execute(statement, params).first() is not None


def _thread_by_key(locked: bool) -> tuple[Any, Any]:
    """The stored session found by its key (``FOR KEY SHARE`` when ``locked``), its
    ``updated_at`` moved when stale: the ``thread`` CTE and the statement selecting its
    id."""
    found = select(_SESSIONS.c.id).where(
        _SESSIONS.c.external_key_hash == bindparam("hash"),
        _SESSIONS.c.external_key == bindparam("key"),
    )
    thread = (locking(found, read=True, key_share=True) if locked else found).cte("thread")
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
    locked: bool,
    missing: tuple[Table, int, tuple[str, ...], tuple[str, ...]],
    upserted: tuple[Table, int, tuple[str, ...], tuple[str, ...]],
    refreshed: tuple[str, ...],
) -> Any:
    """The statement of ``_store_for_session``: the rows' INSERTs as CTEs selecting the
    session's id from ``thread``, found by its key or new."""
    thread, statement = _new_thread() if new else _thread_by_key(locked)
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
