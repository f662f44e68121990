"""The session row as every repository uses it: read, lock, and write with the version check.

Messages, steps, grants and checkpoints all hang off ``agentledger_sessions``: they
load it as a record, lock it (the lock order of every writer starts here), and the
versioned writers (``sessions.save``, ``messages.append``...) bump its ``revision``
with one Core UPDATE that makes exactly the check of the mapper's ``version_id_col``
(``WHERE id = :id AND revision = :old``), so a stale writer's UPDATE matches no row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

from sqlalchemy import (
    ColumnElement,
    Row,
    Select,
    Table,
    Update,
    bindparam,
    exists,
    insert,
    select,
    union_all,
    update,
)
from sqlalchemy.orm import Session

from .._checks import bounded_int
from .._dialects import capabilities, locking
from .._json import decode_json
from ..errors import ConflictError, CorruptRecordError, NotFoundError
from ..models import AgentMessage, AgentSession
from ..models.types import json_text
from ..records import RunSummary, SessionRecord, SessionSelection, SessionSummary, from_stored
from ._statements import returns_from_update

if TYPE_CHECKING:
    from ._base import Executor

SESSIONS = cast(Table, AgentSession.__table__)
TABLE = SESSIONS.name
_JSON_COLUMNS = ("state", "last_run")
_NOT_IN_RECORD = ("external_key_hash",)
_COLUMNS = tuple(column for column in SESSIONS.c if column.name not in _NOT_IN_RECORD)
"""The columns a SessionRecord holds, in table (and record field) order."""
_RECORD_COLUMNS = tuple(
    json_text(column).label(column.name) if column.name in _JSON_COLUMNS else column
    for column in _COLUMNS
)
RECORD_COLUMNS = _RECORD_COLUMNS
"""Every column of a SessionRecord (JSON columns as text), for reads that build one."""
SUMMARY_COLUMNS = (
    SESSIONS.c.id,
    SESSIONS.c.title,
    SESSIONS.c.preview,
    SESSIONS.c.app_name,
    SESSIONS.c.user_id,
    SESSIONS.c.model,
    SESSIONS.c.status,
    SESSIONS.c.message_count,
    SESSIONS.c.step_count,
    SESSIONS.c.input_tokens,
    SESSIONS.c.output_tokens,
    SESSIONS.c.total_tokens,
    SESSIONS.c.created_at,
    SESSIONS.c.updated_at,
)
"""The columns of a listing row (``SessionSummary``)."""
_MESSAGES = cast(Table, AgentMessage.__table__)
SUMMARY_EXTRAS = {
    "external_key": SESSIONS.c.external_key,
    "state": json_text(SESSIONS.c.state).label("state"),
    # The newest message's own time, by seq (its primary key's order: one index probe).
    "last_message_at": select(_MESSAGES.c.created_at)
    .where(_MESSAGES.c.session_id == SESSIONS.c.id)
    .order_by(_MESSAGES.c.seq.desc())
    .limit(1)
    .correlate(SESSIONS)
    .scalar_subquery()
    .label("last_message_at"),
}
"""What a listing can include on request (``include=``), after ``SUMMARY_COLUMNS``."""
_COUNTS = ("message_count", "step_count", "input_tokens", "output_tokens", "total_tokens")
_BY_ID = SESSIONS.c.id == bindparam("id")
# Built once: building and cache-keying a statement per call cost more than running it.
_LOAD = select(*_RECORD_COLUMNS).where(_BY_ID)
_LOAD_LOCKED = {
    "share": locking(_LOAD, read=True),
    "update": locking(_LOAD),
}
_EXISTS = select(exists().where(_BY_ID))
_EXISTS_LOCKED = {
    lock: locking(select(SESSIONS.c.id).where(_BY_ID), read=lock == "share")
    for lock in ("share", "update")
}
Lock = Literal["share", "update"]


_SESSION_IF_ABSENT: dict[str, Any] = {}
"""The statements of ``insert_session_if_absent`` by dialect, built on first use."""


def insert_session_if_absent(connection: Executor, values: dict[str, Any]) -> bool | None:
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
    found = capabilities(dialect)
    if found.upsert != "on_conflict":
        return None
    statement = _SESSION_IF_ABSENT.get(dialect)
    if statement is None:
        statement = _SESSION_IF_ABSENT[dialect] = (
            found.insert(SESSIONS)
            .values(session_binds())
            .on_conflict_do_nothing()
            # SQLAlchemy reports an INSERT's rowcount only when asked to keep it.
            .execution_options(preserve_rowcount=True)
        )
    return bool(connection.execute(statement, session_params(values)).rowcount == 1)


def session_binds() -> dict[str, Any]:
    """A session row's columns as bind parameters (``s_`` and the column's key)."""
    return {name: bindparam(f"s_{name}", type_=column.type) for name, column in SESSIONS.c.items()}


def session_params(values: dict[str, Any]) -> dict[str, Any]:
    """The parameters of ``session_binds`` for a row's column values."""
    return {f"s_{column.key}": values[column.key] for column in SESSIONS.c}


def record_of(row: Row[Any]) -> SessionRecord:
    """A SessionRecord from a row of every session column (JSON columns as text), built
    without validating again what was validated on write; the last run (a nested
    record whose time is stored as text) is validated."""
    return _record_from(dict(row._mapping))


def _decoded(value: Any, id: str, column: str) -> Any:
    if isinstance(value, str):
        return decode_json(value, table=TABLE, key=id, column=column)
    return value  # decoded by a PostgreSQL driver (RETURNING of a json column)


def _record_from(values: dict[str, Any]) -> SessionRecord:
    """A SessionRecord from every column of a session row, in table order."""
    id = values["id"]
    state = _decoded(values["state"], id, "state")
    if type(state) is not dict:
        raise _corrupt(id, "state", "is JSON but not an object")
    values["state"] = state
    last_run = _decoded(values["last_run"], id, "last_run")
    if last_run is not None:
        try:
            last_run = RunSummary.model_validate(last_run)
        except ValueError as error:
            raise _corrupt(id, "last_run", f"is JSON but not a run summary ({error})") from None
    values["last_run"] = last_run
    return from_stored(SessionRecord, values)


def _corrupt(id: str, column: str, problem: str) -> CorruptRecordError:
    return CorruptRecordError(
        f"{TABLE} row {id!r}: column {column} {problem}; it was written by something "
        "other than agentledger",
        table=TABLE,
        key=id,
        column=column,
    )


def summary_of(row: Sequence[Any], include: Sequence[str] = ()) -> SessionSummary:
    """A SessionSummary from a row of ``SUMMARY_COLUMNS`` followed by the ``include``d
    extras (in ``SUMMARY_EXTRAS`` order); title falls back to the preview."""
    base = len(SUMMARY_COLUMNS)
    extras = dict(zip(include, row[base:], strict=True))
    (id, title, preview, app_name, user_id, model, status, *counts, created_at, updated_at) = row[
        :base
    ]
    state = extras.get("state")
    if state is not None:
        state = _decoded(state, id, "state")
        if type(state) is not dict:
            raise _corrupt(id, "state", "is JSON but not an object")
    values = {
        "id": id,
        "title": title or preview,
        "app_name": app_name,
        "user_id": user_id,
        "model": model,
        "status": status,
        **dict(zip(_COUNTS, counts, strict=True)),
        "created_at": created_at,
        "updated_at": updated_at,
        "external_key": extras.get("external_key"),
        "state": state,
        "last_message_at": extras.get("last_message_at"),
    }
    return from_stored(SessionSummary, values)


def load_record(session: Session, id: str, *, lock: Lock | None = None) -> SessionRecord:
    """The session ``id`` as a record; NotFoundError when it is not there.

    With ``lock``, a locking read (FOR SHARE / FOR UPDATE; SQLite's write transactions
    hold the database lock already): it sees the latest committed row even under
    MariaDB's REPEATABLE READ, where a plain SELECT would reuse the first snapshot.
    """
    query = _LOAD if lock is None else _LOAD_LOCKED[lock]
    row = session.connection().execute(query, {"id": id}).first()
    if row is None:
        raise NotFoundError(f"no session {id!r}", id=id)
    return record_of(row)


def session_exists(session: Session, id: str, *, lock: Lock | None = None) -> bool:
    """Whether session ``id`` exists; with ``lock``, its row stays locked until commit."""
    if lock is None:
        return bool(session.connection().execute(_EXISTS, {"id": id}).scalar())
    return session.connection().execute(_EXISTS_LOCKED[lock], {"id": id}).first() is not None


def _write_statement(columns: tuple[str, ...], returning: bool) -> Update:
    """``UPDATE agentledger_sessions SET <columns>, revision = :new_revision WHERE id =
    :b_id AND revision = :b_revision``: exactly the check and bump the mapper's
    ``version_id_col`` makes, built once per set of columns; with ``returning``, the
    UPDATE hands back every column of the record."""
    statement = (
        update(SESSIONS)
        .where(SESSIONS.c.id == bindparam("b_id"), SESSIONS.c.revision == bindparam("b_revision"))
        .values(
            {**{name: bindparam(name) for name in columns}, "revision": bindparam("new_revision")}
        )
    )
    return statement.returning(*_RECORD_COLUMNS) if returning else statement


_WRITES: dict[tuple[tuple[str, ...], bool], Update] = {}


def write_versioned(
    session: Session, record: SessionRecord, values: dict[str, Any]
) -> SessionRecord:
    """Write ``values`` to the session row and bump its revision, if the row is still at
    the record's revision; returns the session as the write left it.

    One Core UPDATE with the revision in its WHERE (no ORM flush: no unit-of-work,
    identity-map or mapper work per call). Where the database can
    (``returns_from_update``), the UPDATE returns the row; else a SELECT reads it back
    under the lock the UPDATE took. Exact either way, including the counters, totals,
    status and checkpoint pointer that step appends, finalize and checkpoints move
    without a revision bump. A stale revision raises ConflictError (``stale``, or
    ``deleted`` when the session is gone) and writes nothing; a revision no database
    binds (an edited record's) is a ValidationError before any SQL.
    """
    bounded_int(record.revision, "record.revision", low=1)
    loaded = session.identity_map.get(session.identity_key(AgentSession, record.id))
    if loaded is not None:  # an ORM row of the caller's, now behind the database
        session.expunge(loaded)
    returning = returns_from_update(session)
    columns = tuple(values)
    statement = _WRITES.get((columns, returning))
    if statement is None:
        statement = _WRITES.setdefault((columns, returning), _write_statement(columns, returning))
    params = {
        **values,
        "b_id": record.id,
        "b_revision": record.revision,
        "new_revision": record.revision + 1,
    }
    result = session.connection().execute(statement, params)
    if returning:
        row = result.first()
        if row is None:
            raise _stale_or_deleted(session, record)
        return record_of(row)
    if result.rowcount == 0:
        raise _stale_or_deleted(session, record)
    return load_record(session, record.id)


ONE_STATEMENT_ROWS = 16
"""The most rows ``write_versioned_and_insert`` takes: a statement per batch size is
cached, and a long batch gains nothing from saving one round trip."""
_APPENDS: dict[tuple[Any, ...], Select[Any]] = {}


def _append_statement(
    columns: tuple[str, ...], table: Table, names: tuple[str, ...], count: int
) -> Select[Any]:
    """``WITH written AS (UPDATE agentledger_sessions ... RETURNING ...), inserted AS
    (INSERT INTO <table> SELECT ... FROM written) SELECT * FROM written``: the rows are
    inserted only when the versioned UPDATE matched (they select from its RETURNING),
    with the revision check exactly as ``_write_statement`` makes it."""
    written = _write_statement(columns, returning=True).cte("written")
    selects = [
        select(
            *(
                written.c.id
                if name == "session_id"
                else bindparam(f"r{index}_{name}", type_=table.c[name].type)
                for name in names
            )
        ).select_from(written)
        for index in range(count)
    ]
    source = selects[0] if count == 1 else union_all(*selects)
    inserted = insert(table).from_select(list(names), source).cte("inserted")
    return select(*written.c).add_cte(inserted)


def write_versioned_and_insert(
    session: Session,
    record: SessionRecord,
    values: dict[str, Any],
    table: Table,
    rows: list[dict[str, Any]],
) -> SessionRecord:
    """``write_versioned`` and the INSERT of ``rows`` (child rows of the session, each
    with every column of the first, at most ``ONE_STATEMENT_ROWS``) in one statement,
    a data-modifying CTE, where the database has them (``_statements.
    appends_in_one_statement``): one round trip instead of two. A stale revision
    inserts nothing and raises the same ConflictError."""
    bounded_int(record.revision, "record.revision", low=1)
    loaded = session.identity_map.get(session.identity_key(AgentSession, record.id))
    if loaded is not None:
        session.expunge(loaded)
    names = tuple(rows[0])
    key = (tuple(values), table.name, names, len(rows))
    statement = _APPENDS.get(key)
    if statement is None:
        statement = _APPENDS.setdefault(key, _append_statement(key[0], table, names, len(rows)))
    params = {
        **values,
        "b_id": record.id,
        "b_revision": record.revision,
        "new_revision": record.revision + 1,
    }
    for index, row in enumerate(rows):
        params.update(
            (f"r{index}_{name}", value) for name, value in row.items() if name != "session_id"
        )
    found = session.connection().execute(statement, params).first()
    if found is None:
        raise _stale_or_deleted(session, record)
    return record_of(found)


def current_or_conflict(session: Session, record: SessionRecord) -> SessionRecord:
    """The stored session, when it is still at the record's revision; else the
    ConflictError a versioned write from the record would raise (``stale``, ``deleted``)."""
    try:
        current = load_record(session, record.id)
    except NotFoundError:
        raise _conflict(record, exists=False) from None
    if current.revision != record.revision:
        raise _conflict(record, exists=True)
    return current


def _stale_or_deleted(session: Session, record: SessionRecord) -> ConflictError:
    session.rollback()
    return _conflict(record, exists=session_exists(session, record.id))


def _conflict(record: SessionRecord, *, exists: bool) -> ConflictError:
    if exists:
        return ConflictError(
            f"session {record.id!r} changed since revision {record.revision}; "
            "read it again and re-apply the change",
            reason="stale",
            id=record.id,
            expected=record.revision,
        )
    return ConflictError(
        f"session {record.id!r} was deleted by another writer", reason="deleted", id=record.id
    )


def selected(selection: SessionSelection) -> list[ColumnElement[bool]]:
    """The WHERE conditions on ``agentledger_sessions`` that pick ``selection``."""
    found: list[ColumnElement[bool]] = []
    if selection.session_ids is not None:
        found.append(SESSIONS.c.id.in_(selection.session_ids))
    if selection.app_name is not None:
        found.append(SESSIONS.c.app_name == selection.app_name)
    if selection.user_id is not None:
        found.append(SESSIONS.c.user_id == selection.user_id)
    if selection.updated_since is not None:
        found.append(SESSIONS.c.updated_at >= selection.updated_since)
    if selection.updated_before is not None:
        found.append(SESSIONS.c.updated_at < selection.updated_before)
    return found


def lock_sessions(session: Session, ids: Sequence[str]) -> list[str]:
    """Lock the session rows of ``ids`` in id order (the order every writer of several
    sessions locks in, so two of them never deadlock); returns the ids still there."""
    if not ids:
        return []
    query = select(SESSIONS.c.id).where(SESSIONS.c.id.in_(sorted(set(ids))))
    return list(session.execute(locking(query.order_by(SESSIONS.c.id))).scalars())
