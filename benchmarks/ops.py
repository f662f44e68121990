"""The operations, each done three ways with the same durable work and transaction shape.

- ``agentledger``: the public async API, validation included.
- ``core``: the same statements, built once at import (``bindparam``), executed with
  SQLAlchemy Core on the ledger's own AsyncEngine (same pool, same SQLite set-up).
- ``raw``: hand-written SQL on one held connection of the plain async driver.

Every variant serialises JSON on write and decodes it (and the timestamps) on read,
so the floors hand back the same data the API does, only without records.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from agentledger import AgentCheckpoint, AgentMessage, AgentSession, AgentStep, AsyncLedger
from agentledger import CheckpointPayload as Payload
from agentledger.engine import WRITE_OPTION
from agentledger.models.types import json_text
from agentledger.repositories._session_row import RECORD_COLUMNS
from agentledger.repositories._statements import snapshot_read_options

from .raw import RawConnection, from_db_time, loads, to_db_time
from .seed import MESSAGE_TEXT

S = cast(Table, AgentSession.__table__)
M = cast(Table, AgentMessage.__table__)
ST = cast(Table, AgentStep.__table__)
C = cast(Table, AgentCheckpoint.__table__)

Call = Callable[[], Awaitable[Any]]


class Conflict(Exception):
    """A floor's optimistic UPDATE matched no row."""


def now() -> datetime:
    return datetime.now(UTC)


def message_content(index: int) -> dict[str, Any]:
    return {"parts": [{"type": "text", "text": f"{index:08d} {MESSAGE_TEXT}"[:300]}]}


def step_payload(index: int) -> dict[str, Any]:
    return {
        "step_index": index,
        "kind": "model",
        "model": "bench-model",
        "input": {"messages": [{"role": "user", "content": f"question {index}"}]},
        "output": {"text": f"answer {index}", "finish_reason": "stop"},
        "usage": {"input_tokens": 10, "output_tokens": 20, "total_tokens": 30},
    }


def checkpoint_payload(size: int) -> dict[str, Any]:
    """A checkpoint of about ``size`` bytes of JSON: a context window of 1 KB messages."""
    text = (MESSAGE_TEXT * 4)[:1000]
    count = max(1, size // 1040)
    return {
        "context_window": [
            {"role": "user" if i % 2 == 0 else "assistant", "content": text, "metadata": {}}
            for i in range(count)
        ],
        "pending_tool_calls": {
            "call_1": {"tool_call": {"id": "call_1", "name": "search", "arguments": {}}}
        },
        "interrupt_requesters": {},
        "runtime_state": {"step": 7, "plan": ["look", "think", "act"]},
        "pending_interrupts": None,
        "resolved_interrupts": None,
    }


# --- prebuilt Core statements (the floor builds nothing per call) -------------------

APPEND_UPDATE = (
    update(S)
    .where(S.c.id == bindparam("b_id"), S.c.revision == bindparam("b_revision"))
    .values(
        message_count=bindparam("message_count"),
        message_seq=bindparam("message_seq"),
        updated_at=bindparam("updated_at"),
        revision=bindparam("revision"),
    )
)
APPEND_INSERT = insert(M)
READ_SESSION = select(S.c.revision, S.c.message_count, S.c.message_seq).where(
    S.c.id == bindparam("id")
)
_MESSAGE_COLUMNS = (
    M.c.seq,
    M.c.role,
    json_text(M.c.content).label("content"),
    json_text(M.c.metadata).label("metadata"),
    M.c.created_at,
)
READ_ALL = select(*_MESSAGE_COLUMNS).where(M.c.session_id == bindparam("id")).order_by(M.c.seq)
READ_LAST = (
    select(*_MESSAGE_COLUMNS)
    .where(M.c.session_id == bindparam("id"))
    .order_by(M.c.seq.desc())
    .limit(bindparam("n"))
)
SESSION_RECORD = select(*RECORD_COLUMNS).where(S.c.id == bindparam("id"))
_RECORD_NAMES = tuple(c.name for c in S.c if c.name != "external_key_hash")
_USAGE_SUMS = (
    func.coalesce(func.sum(ST.c.input_tokens), 0),
    func.coalesce(func.sum(ST.c.output_tokens), 0),
    func.coalesce(func.sum(ST.c.total_tokens), 0),
)
USAGE = select(*_USAGE_SUMS).where(ST.c.session_id == bindparam("id"))
_SUMMARY = (
    S.c.id,
    S.c.title,
    S.c.preview,
    S.c.app_name,
    S.c.user_id,
    S.c.model,
    S.c.status,
    S.c.message_count,
    S.c.step_count,
    S.c.input_tokens,
    S.c.output_tokens,
    S.c.total_tokens,
    S.c.created_at,
    S.c.updated_at,
)
LIST_FIRST = select(*_SUMMARY).order_by(S.c.updated_at.desc(), S.c.id.desc()).limit(51)
LIST_AFTER = (
    select(*_SUMMARY)
    .where(
        S.c.updated_at <= bindparam("u", type_=S.c.updated_at.type),
        (S.c.updated_at < bindparam("u", type_=S.c.updated_at.type)) | (S.c.id < bindparam("i")),
    )
    .order_by(S.c.updated_at.desc(), S.c.id.desc())
    .limit(51)
)
_STEP_COUNTERS = {
    "input_tokens": S.c.input_tokens + bindparam("i"),
    "output_tokens": S.c.output_tokens + bindparam("o"),
    "total_tokens": S.c.total_tokens + bindparam("t"),
    "updated_at": bindparam("now"),
}
STEP_ALLOCATE = (
    update(S)
    .where(S.c.id == bindparam("b_id"))
    .values(step_count=S.c.step_count + bindparam("n"), **_STEP_COUNTERS)
    .returning(S.c.step_count)
)
STEP_ALLOCATE_MYSQL = (
    update(S)
    .where(S.c.id == bindparam("b_id"))
    .values(step_count=func.last_insert_id(S.c.step_count + bindparam("n")), **_STEP_COUNTERS)
)
LAST_INSERT_ID = select(func.last_insert_id())
STEP_INSERT = insert(ST)
CHECKPOINT_LOCK = (
    select(S.c.latest_checkpoint_ref).where(S.c.id == bindparam("id")).with_for_update()
)
CHECKPOINT_ROW = (
    select(C.c.session_id, C.c.seq, C.c.expires_at)
    .where(C.c.ref == bindparam("ref"))
    .with_for_update(read=True)
)
_CHECKPOINT_SET = {"latest_checkpoint_ref": bindparam("b_ref"), "updated_at": bindparam("now")}
CHECKPOINT_ALLOCATE = (
    update(S)
    .where(S.c.id == bindparam("b_id"))
    .values(checkpoint_seq=S.c.checkpoint_seq + 1, **_CHECKPOINT_SET)
    .returning(S.c.checkpoint_seq)
)
CHECKPOINT_ALLOCATE_MYSQL = (
    update(S)
    .where(S.c.id == bindparam("b_id"))
    .values(checkpoint_seq=func.last_insert_id(S.c.checkpoint_seq + 1), **_CHECKPOINT_SET)
)
CHECKPOINT_INSERT = insert(C)
CHECKPOINT_LATEST = (
    select(
        C.c.ref,
        C.c.session_id,
        C.c.seq,
        C.c.parent_ref,
        C.c.created_at,
        C.c.expires_at,
        json_text(C.c.payload).label("payload"),
    )
    .where(
        C.c.session_id == bindparam("id"),
        (C.c.expires_at.is_(None)) | (C.c.expires_at > bindparam("now")),
    )
    .order_by(C.c.seq.desc())
    .limit(1)
)
_STEP_READ_COLUMNS = tuple(
    json_text(column).label(column.name)
    if column.name in ("input", "output", "tool_calls", "usage_extra")
    else column
    for column in ST.c
    if column.name != "id"
)
STEP_PAGE = (
    select(*_STEP_READ_COLUMNS)
    .where(ST.c.session_id == bindparam("id"), ST.c.seq > bindparam("after"))
    .order_by(ST.c.seq)
    .limit(bindparam("n"))
)

# --- hand-written SQL of the raw floor ------------------------------------------------

RAW_APPEND_UPDATE = (
    "UPDATE agentledger_sessions SET message_count = ?, message_seq = ?, updated_at = ?, "
    "revision = ? WHERE id = ? AND revision = ?"
)
RAW_APPEND_INSERT = (
    "INSERT INTO agentledger_messages (session_id, seq, {role}, content, metadata, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
RAW_READ_SESSION = (
    "SELECT revision, message_count, message_seq FROM agentledger_sessions WHERE id = ?"
)
RAW_READ_SESSION_RECORD = (
    "SELECT " + ", ".join(_RECORD_NAMES) + " FROM agentledger_sessions WHERE id = ?"  # noqa: S608
)
RAW_USAGE = (
    "SELECT COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), "
    "COALESCE(SUM(total_tokens), 0) FROM agentledger_steps WHERE session_id = ?"
)
RAW_READ_ALL = (
    "SELECT seq, {role}, content, metadata, created_at FROM agentledger_messages "
    "WHERE session_id = ? ORDER BY seq"
)
RAW_READ_LAST = (
    "SELECT seq, {role}, content, metadata, created_at FROM agentledger_messages "
    "WHERE session_id = ? ORDER BY seq DESC LIMIT 50"
)
RAW_SNAPSHOT_MYSQL = "START TRANSACTION READ ONLY, WITH CONSISTENT SNAPSHOT"
_RAW_SUMMARY = (
    "SELECT id, title, preview, app_name, user_id, model, status, message_count, step_count, "
    "input_tokens, output_tokens, total_tokens, created_at, updated_at FROM agentledger_sessions "
)
RAW_LIST_FIRST = _RAW_SUMMARY + "ORDER BY updated_at DESC, id DESC LIMIT 51"
RAW_LIST_AFTER = (
    _RAW_SUMMARY + "WHERE updated_at <= ? AND (updated_at < ? OR id < ?) "
    "ORDER BY updated_at DESC, id DESC LIMIT 51"
)
RAW_STEP_ALLOCATE = (
    "UPDATE agentledger_sessions SET step_count = step_count + ?, input_tokens = input_tokens "
    "+ ?, output_tokens = output_tokens + ?, total_tokens = total_tokens + ?, updated_at = ? "
    "WHERE id = ? RETURNING step_count"
)
RAW_STEP_ALLOCATE_MYSQL = (
    "UPDATE agentledger_sessions SET step_count = LAST_INSERT_ID(step_count + ?), "
    "input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, "
    "total_tokens = total_tokens + ?, updated_at = ? WHERE id = ?"
)
RAW_STEP_INSERT = (
    "INSERT INTO agentledger_steps (session_id, seq, step_index, run_id, kind, name, model, "
    "input, output, tool_calls, input_tokens, output_tokens, total_tokens, usage_extra, "
    "started_at, ended_at, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
RAW_CHECKPOINT_LOCK = (
    "SELECT latest_checkpoint_ref FROM agentledger_sessions WHERE id = ?{for_update}"
)
RAW_CHECKPOINT_ROW = (
    "SELECT session_id, seq, expires_at FROM agentledger_checkpoints WHERE ref = ?{for_share}"
)
RAW_CHECKPOINT_ALLOCATE = (
    "UPDATE agentledger_sessions SET checkpoint_seq = checkpoint_seq + 1, "
    "latest_checkpoint_ref = ?, updated_at = ? WHERE id = ? RETURNING checkpoint_seq"
)
RAW_CHECKPOINT_ALLOCATE_MYSQL = (
    "UPDATE agentledger_sessions SET checkpoint_seq = LAST_INSERT_ID(checkpoint_seq + 1), "
    "latest_checkpoint_ref = ?, updated_at = ? WHERE id = ?"
)
RAW_CHECKPOINT_INSERT = (
    "INSERT INTO agentledger_checkpoints (ref, session_id, seq, parent_ref, created_at, "
    "expires_at, size, payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
RAW_CHECKPOINT_LATEST = (
    "SELECT ref, session_id, seq, parent_ref, created_at, expires_at, payload "
    "FROM agentledger_checkpoints WHERE session_id = ? AND (expires_at IS NULL OR "
    "expires_at > ?) ORDER BY seq DESC LIMIT 1"
)
RAW_STEP_PAGE = (
    "SELECT session_id, seq, step_index, run_id, kind, name, model, input, output, tool_calls, "
    "input_tokens, output_tokens, total_tokens, usage_extra, started_at, ended_at, error "
    "FROM agentledger_steps WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?"
)


@dataclass
class Floors:
    """What the floors of one database share: engines and raw connections."""

    dialect: str
    ledger: AsyncLedger
    raw_write: RawConnection
    raw_read: RawConnection
    write_engine: AsyncEngine = field(init=False)
    read_engine: AsyncEngine = field(init=False)
    snapshot_engine: AsyncEngine = field(init=False)

    def __post_init__(self) -> None:
        engine = self.ledger.engine
        self.write_engine = engine.execution_options(**{WRITE_OPTION: True})
        # The best a Core reader can do on PostgreSQL: no BEGIN/ROLLBACK around a read.
        self.read_engine = (
            engine.execution_options(isolation_level="AUTOCOMMIT")
            if self.dialect == "postgresql"
            else engine
        )
        self.snapshot_engine = engine.execution_options(
            **snapshot_read_options(engine.dialect.name)
        )

    def raw_sql(self, template: str) -> str:
        mysql = self.dialect == "mysql"
        return template.format(
            role="`role`" if mysql else "role",
            for_update="" if self.dialect == "sqlite" else " FOR UPDATE",
            for_share={"sqlite": "", "postgresql": " FOR SHARE"}.get(
                self.dialect, " LOCK IN SHARE MODE"
            ),
        )

    def db_time(self, value: datetime) -> Any:
        return to_db_time(self.dialect, value)

    def db_json(self, value: Any) -> str:
        return json.dumps(value)


# --- append one message -------------------------------------------------------------


@dataclass
class View:
    """What a writer holds of its session: enough for an optimistic append."""

    id: str
    revision: int
    message_count: int
    message_seq: int
    appended: int = 0


class LedgerAppend:
    def __init__(self, floors: Floors, record: Any) -> None:
        self.ledger = floors.ledger
        self.record = record
        self.index = 0

    async def __call__(self) -> None:
        self.index += 1
        role = "user" if self.index % 2 else "assistant"
        message = {"role": role, "content": message_content(self.index)}
        self.record = (await self.ledger.messages.append(self.record, message)).session


class CoreAppend:
    def __init__(self, floors: Floors, view: View) -> None:
        self.engine = floors.write_engine
        self.view = view

    async def __call__(self) -> None:
        await self.call_with(message_content(self.view.appended + 1))

    async def call_with(self, content: Any) -> None:
        view = self.view
        at = now()
        index = view.appended + 1
        async with self.engine.begin() as connection:
            result = await connection.execute(
                APPEND_UPDATE,
                {
                    "b_id": view.id,
                    "b_revision": view.revision,
                    "message_count": view.message_count + 1,
                    "message_seq": view.message_seq + 1,
                    "updated_at": at,
                    "revision": view.revision + 1,
                },
            )
            if result.rowcount != 1:
                raise Conflict(view.id)
            await connection.execute(
                APPEND_INSERT,
                {
                    "session_id": view.id,
                    "seq": view.message_seq + 1,
                    "role": "user" if index % 2 else "assistant",
                    "content": content,
                    "metadata": {},
                    "created_at": at,
                },
            )
        view.revision += 1
        view.message_count += 1
        view.message_seq += 1
        view.appended = index

    async def reread(self) -> None:
        async with self.engine.connect() as connection:
            row = (await connection.execute(READ_SESSION, {"id": self.view.id})).one()
        self.view.revision, self.view.message_count, self.view.message_seq = row


class RawAppend:
    def __init__(self, floors: Floors, view: View, raw: RawConnection | None = None) -> None:
        self.floors = floors
        self.raw = raw or floors.raw_write
        self.view = view
        self.insert = floors.raw_sql(RAW_APPEND_INSERT)

    async def __call__(self) -> None:
        await self.call_with(message_content(self.view.appended + 1))

    async def call_with(self, content: Any) -> None:
        view, raw = self.view, self.raw
        at = self.floors.db_time(now())
        index = view.appended + 1
        await raw.begin(write=True)
        try:
            matched = await raw.execute(
                RAW_APPEND_UPDATE,
                view.message_count + 1,
                view.message_seq + 1,
                at,
                view.revision + 1,
                view.id,
                view.revision,
            )
            if matched != 1:
                raise Conflict(view.id)
            await raw.execute(
                self.insert,
                view.id,
                view.message_seq + 1,
                "user" if index % 2 else "assistant",
                json.dumps(content),
                "{}",
                at,
            )
        except BaseException:
            await raw.rollback()
            raise
        await raw.commit()
        view.revision += 1
        view.message_count += 1
        view.message_seq += 1
        view.appended = index

    async def reread(self) -> None:
        await self.raw.begin(write=False)
        rows = await self.raw.fetch(RAW_READ_SESSION, self.view.id)
        await self.raw.commit()
        self.view.revision, self.view.message_count, self.view.message_seq = rows[0]


# --- loads: a conversation (the session record and its messages), one snapshot -------


def _decoded(rows: Any) -> list[tuple[Any, ...]]:
    return [(r[0], r[1], loads(r[2]), loads(r[3]), r[4]) for r in rows]


_STATE, _LAST_RUN = _RECORD_NAMES.index("state"), _RECORD_NAMES.index("last_run")
_TIMES = tuple(i for i, name in enumerate(_RECORD_NAMES) if name.endswith("_at"))


def _session_decoded(row: Any, time: Callable[[Any], Any] = lambda value: value) -> tuple[Any, ...]:
    """A session row as the floors hand it back: JSON decoded, times aware."""
    values = list(row)
    values[_STATE], values[_LAST_RUN] = loads(values[_STATE]), loads(values[_LAST_RUN])
    for index in _TIMES:
        values[index] = time(values[index])
    return tuple(values)


def core_conversation(floors: Floors, id: str, last: int | None) -> Call:
    """The session and its messages in one read-only snapshot transaction, as the
    ledger reads them (PostgreSQL REPEATABLE READ READ ONLY; MariaDB START TRANSACTION
    READ ONLY, WITH CONSISTENT SNAPSHOT; SQLite a deferred BEGIN)."""
    engine = floors.snapshot_engine
    mysql = floors.dialect == "mysql"
    query, params = (READ_ALL, {"id": id}) if last is None else (READ_LAST, {"id": id, "n": last})

    async def call() -> tuple[Any, list[tuple[Any, ...]]]:
        async with engine.connect() as connection:
            if mysql:
                await connection.exec_driver_sql(RAW_SNAPSHOT_MYSQL)
            session = (await connection.execute(SESSION_RECORD, {"id": id})).one()
            rows = (await connection.execute(query, params)).all()
            await connection.commit()
        return _session_decoded(session), _decoded(rows if last is None else reversed(rows))

    return call


def _raw_decoded(dialect: str, rows: Any) -> list[tuple[Any, ...]]:
    return [(r[0], r[1], loads(r[2]), loads(r[3]), from_db_time(dialect, r[4])) for r in rows]


async def _raw_read(floors: Floors, sql: str, *params: Any) -> list[Any]:
    raw = floors.raw_read
    return await raw.fetch(sql, *params)


def raw_conversation(floors: Floors, id: str, last: int | None) -> Call:
    """The same snapshot transaction on the plain driver."""
    raw, dialect = floors.raw_read, floors.dialect
    messages = floors.raw_sql(RAW_READ_ALL if last is None else RAW_READ_LAST)

    def time(value: Any) -> Any:
        return from_db_time(dialect, value)

    async def call() -> tuple[Any, list[tuple[Any, ...]]]:
        await raw.begin_snapshot()
        try:
            session = (await raw.fetch(RAW_READ_SESSION_RECORD, id))[0]
            rows = await raw.fetch(messages, id)
        finally:
            await raw.commit()
        decoded = _raw_decoded(dialect, rows if last is None else reversed(rows))
        return _session_decoded(session, time), decoded

    return call


# --- token usage over a long trace ----------------------------------------------------


def core_usage(floors: Floors, id: str) -> Call:
    engine = floors.read_engine

    async def call() -> tuple[int, ...]:
        async with engine.connect() as connection:
            row = (await connection.execute(USAGE, {"id": id})).one()
        return tuple(int(value) for value in row)

    return call


def raw_usage(floors: Floors, id: str) -> Call:
    async def call() -> tuple[int, ...]:
        row = (await _raw_read(floors, RAW_USAGE, id))[0]
        return tuple(int(value) for value in row)

    return call


# --- listing --------------------------------------------------------------------------


def _summaries(rows: Any, convert: Callable[[Any], Any]) -> list[tuple[Any, ...]]:
    return [
        (r[0], r[1] or r[2], *r[3:12], convert(r[12]), convert(r[13]))
        for r in rows[:50]
    ]  # fmt: skip


def core_list(floors: Floors, after: tuple[datetime, str] | None) -> Call:
    engine = floors.read_engine
    statement = LIST_FIRST if after is None else LIST_AFTER
    params = {} if after is None else {"u": after[0], "i": after[1]}

    async def call() -> list[tuple[Any, ...]]:
        async with engine.connect() as connection:
            rows = (await connection.execute(statement, params)).all()
        return _summaries(rows, lambda value: value)

    return call


def raw_list(floors: Floors, after: tuple[datetime, str] | None) -> Call:
    dialect = floors.dialect
    sql = RAW_LIST_FIRST if after is None else RAW_LIST_AFTER
    params = () if after is None else (*[floors.db_time(after[0])] * 2, after[1])

    async def call() -> list[tuple[Any, ...]]:
        rows = await _raw_read(floors, sql, *params)
        return _summaries(rows, lambda value: from_db_time(dialect, value))

    return call


# --- steps ----------------------------------------------------------------------------


def _step_row(id: str, seq: int, step: dict[str, Any], at: datetime) -> dict[str, Any]:
    usage = step["usage"]
    return {
        "session_id": id,
        "seq": seq,
        "step_index": step["step_index"],
        "run_id": None,
        "kind": step["kind"],
        "name": None,
        "model": step["model"],
        "input": step["input"],
        "output": step["output"],
        "tool_calls": None,
        "input_tokens": usage["input_tokens"],
        "output_tokens": usage["output_tokens"],
        "total_tokens": usage["total_tokens"],
        "usage_extra": None,
        "started_at": at,
        "ended_at": None,
        "error": None,
    }


def _usage(steps: list[dict[str, Any]]) -> tuple[int, int, int]:
    return (
        sum(s["usage"]["input_tokens"] for s in steps),
        sum(s["usage"]["output_tokens"] for s in steps),
        sum(s["usage"]["total_tokens"] for s in steps),
    )


def ledger_steps(floors: Floors, id: str, batch: int) -> Call:
    ledger = floors.ledger
    counter = [0]

    async def call() -> Any:
        counter[0] += 1
        steps = [step_payload(counter[0] * batch + i) for i in range(batch)]
        return await ledger.steps.append(id, steps if batch > 1 else steps[0])

    return call


def core_steps(floors: Floors, id: str, batch: int) -> Call:
    engine = floors.write_engine
    mysql = floors.dialect == "mysql"
    counter = [0]

    async def call() -> Any:
        counter[0] += 1
        steps = [step_payload(counter[0] * batch + i) for i in range(batch)]
        i, o, t = _usage(steps)
        at = now()
        params = {"b_id": id, "n": batch, "i": i, "o": o, "t": t, "now": at}
        async with engine.begin() as connection:
            if mysql:
                await connection.execute(STEP_ALLOCATE_MYSQL, params)
                last = (await connection.execute(LAST_INSERT_ID)).scalar_one()
            else:
                last = (await connection.execute(STEP_ALLOCATE, params)).scalar_one()
            first = last - batch + 1
            rows = [_step_row(id, first + k, step, at) for k, step in enumerate(steps)]
            await connection.execute(STEP_INSERT, rows)
        return rows

    return call


def raw_steps(floors: Floors, id: str, batch: int) -> Call:
    raw = floors.raw_write
    mysql = floors.dialect == "mysql"
    counter = [0]

    async def call() -> Any:
        counter[0] += 1
        steps = [step_payload(counter[0] * batch + i) for i in range(batch)]
        i, o, t = _usage(steps)
        at = floors.db_time(now())
        await raw.begin(write=True)
        if mysql:
            await raw.execute(RAW_STEP_ALLOCATE_MYSQL, batch, i, o, t, at, id)
            last = (await raw.fetch("SELECT LAST_INSERT_ID()"))[0][0]
        else:
            last = (await raw.fetch(RAW_STEP_ALLOCATE, batch, i, o, t, at, id))[0][0]
        first = last - batch + 1
        rows = [
            (
                id, first + k, s["step_index"], None, s["kind"], None, s["model"],
                json.dumps(s["input"]), json.dumps(s["output"]), None,
                s["usage"]["input_tokens"], s["usage"]["output_tokens"],
                s["usage"]["total_tokens"], None, at, None, None,
            )
            for k, s in enumerate(steps)
        ]  # fmt: skip
        if batch == 1:
            await raw.execute(RAW_STEP_INSERT, *rows[0])
        else:
            await raw.executemany(RAW_STEP_INSERT, rows)
        await raw.commit()
        return rows

    return call


# --- checkpoints ----------------------------------------------------------------------


def _new_ref() -> str:
    import uuid

    return uuid.uuid4().hex


def ledger_checkpoint_save(floors: Floors, id: str, payload: dict[str, Any]) -> Call:
    ledger = floors.ledger
    model = Payload.model_validate(payload)

    async def call() -> Any:
        return await ledger.checkpoints.save(id, model)

    return call


def core_checkpoint_save(floors: Floors, id: str, payload: dict[str, Any]) -> Call:
    engine = floors.write_engine
    mysql = floors.dialect == "mysql"

    async def call() -> Any:
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        at = now()
        ref = _new_ref()
        async with engine.begin() as connection:
            pointer = (await connection.execute(CHECKPOINT_LOCK, {"id": id})).scalar()
            if pointer is not None:
                await connection.execute(CHECKPOINT_ROW, {"ref": pointer})
            params = {"b_id": id, "b_ref": ref, "now": at}
            if mysql:
                await connection.execute(CHECKPOINT_ALLOCATE_MYSQL, params)
                seq = (await connection.execute(LAST_INSERT_ID)).scalar_one()
            else:
                seq = (await connection.execute(CHECKPOINT_ALLOCATE, params)).scalar_one()
            await connection.execute(
                CHECKPOINT_INSERT,
                {
                    "ref": ref,
                    "session_id": id,
                    "seq": seq,
                    "parent_ref": pointer,
                    "created_at": at,
                    "expires_at": None,
                    "size": len(text.encode()),
                    "payload": payload,
                },
            )
        return ref

    return call


def raw_checkpoint_save(floors: Floors, id: str, payload: dict[str, Any]) -> Call:
    raw = floors.raw_write
    mysql = floors.dialect == "mysql"
    lock = floors.raw_sql(RAW_CHECKPOINT_LOCK)
    row = floors.raw_sql(RAW_CHECKPOINT_ROW)

    async def call() -> Any:
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        at = floors.db_time(now())
        ref = _new_ref()
        await raw.begin(write=True)
        pointer = (await raw.fetch(lock, id))[0][0]
        if pointer is not None:
            await raw.fetch(row, pointer)
        if mysql:
            await raw.execute(RAW_CHECKPOINT_ALLOCATE_MYSQL, ref, at, id)
            seq = (await raw.fetch("SELECT LAST_INSERT_ID()"))[0][0]
        else:
            seq = (await raw.fetch(RAW_CHECKPOINT_ALLOCATE, ref, at, id))[0][0]
        await raw.execute(
            RAW_CHECKPOINT_INSERT, ref, id, seq, pointer, at, None, len(text.encode()), text
        )
        await raw.commit()
        return ref

    return call


def ledger_checkpoint_latest(floors: Floors, id: str) -> Call:
    ledger = floors.ledger

    async def call() -> Any:
        return await ledger.checkpoints.latest(id)

    return call


def core_checkpoint_latest(floors: Floors, id: str) -> Call:
    engine = floors.read_engine

    async def call() -> Any:
        async with engine.connect() as connection:
            r = (await connection.execute(CHECKPOINT_LATEST, {"id": id, "now": now()})).first()
        assert r is not None
        return (*r[:6], loads(r[6]))

    return call


def raw_checkpoint_latest(floors: Floors, id: str) -> Call:
    dialect = floors.dialect

    async def call() -> Any:
        rows = await _raw_read(floors, RAW_CHECKPOINT_LATEST, id, floors.db_time(now()))
        r = rows[0]
        created, expires = from_db_time(dialect, r[4]), from_db_time(dialect, r[5])
        return (*r[:4], created, expires, loads(r[6]))

    return call
