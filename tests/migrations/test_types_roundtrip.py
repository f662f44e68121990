"""Every column type round-trips through the ORM on every dialect, on a migrated database.

The models declare the types and the migration creates the columns: these tests catch
the two disagreeing (a DATETIME without microseconds, a case-insensitive collation).
"""

from __future__ import annotations

import hashlib
import math
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.engine import URL
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from agentledger.engine import create_sync_engine
from agentledger.errors import ValidationError
from agentledger.models import AgentCheckpoint, AgentGrant, AgentMessage, AgentSession, AgentStep

from ._support import new_message, new_session

PLUS_14 = timezone(timedelta(hours=14))
MINUS_12 = timezone(timedelta(hours=-12))
DOCUMENT: dict[str, Any] = {
    "unicode": 'héllo wörld — 日本語 🌍 \u2028 "quoted" \\ tab\t',
    "nested": {"list": [1, [2, [3, {"deep": None}]]], "empty": {}, "flags": [True, False]},
    "max_int64": 2**63 - 1,
    "min_int64": -(2**63),
    "negative_zero": -0.0,
    "fraction": 0.1,
}


@pytest.fixture
def engine(migrated_url: URL) -> Iterator[Engine]:
    engine = create_sync_engine(migrated_url, poolclass=NullPool)
    try:
        yield engine
    finally:
        engine.dispose()


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def _grant(session_id: str, capability: str, at: datetime) -> AgentGrant:
    return AgentGrant(
        session_id=session_id,
        capability=capability,
        capability_hash=hashlib.sha256(capability.encode()).hexdigest(),
        granted_at=at,
        expires_at=at + timedelta(days=1),
    )


def _step(session_id: str, at: datetime, payload: Any = None) -> AgentStep:
    return AgentStep(
        session_id=session_id,
        seq=1,
        step_index=0,
        kind="model",
        input=payload,
        output=payload,
        tool_calls=payload,
        usage_extra={"cached": 2**63 - 1},
        input_tokens=2**63 - 1,
        output_tokens=0,
        total_tokens=2**63 - 1,
        started_at=at,
        ended_at=at + timedelta(microseconds=1),
    )


def _checkpoint(session_id: str, ref: str, at: datetime, payload: Any = None) -> AgentCheckpoint:
    return AgentCheckpoint(
        ref=ref,
        session_id=session_id,
        seq=1,
        created_at=at,
        expires_at=at + timedelta(hours=1),
        size=0,
        payload=payload if payload is not None else {},
    )


def _insert(engine: Engine, *rows: Any) -> None:
    with Session(engine) as session, session.begin():
        for row in rows:
            session.add(row)
            session.flush()  # parents before children, whatever the unit of work's order


def _is_utc(value: datetime) -> bool:
    return value.tzinfo is not None and value.utcoffset() == timedelta(0)


def test_aware_datetimes_come_back_as_the_same_instant_in_utc(engine: Engine) -> None:
    sid, ref = _id("time"), _id("ref")
    at_plus_14 = datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=PLUS_14)
    at_minus_12 = datetime(2026, 12, 31, 23, 59, 59, 999999, tzinfo=MINUS_12)
    message = new_message(sid, 1)
    message.created_at = at_minus_12
    _insert(
        engine,
        new_session(sid, at=at_plus_14),
        message,
        _step(sid, at_plus_14),
        _grant(sid, "tool:search", at_minus_12),
        _checkpoint(sid, ref, at_plus_14),
    )

    with Session(engine) as session:
        stored = session.get_one(AgentSession, sid)
        step = session.scalars(select(AgentStep).where(AgentStep.session_id == sid)).one()
        grant = session.scalars(select(AgentGrant).where(AgentGrant.session_id == sid)).one()
        kept = session.scalars(select(AgentMessage).where(AgentMessage.session_id == sid)).one()
        checkpoint = session.get_one(AgentCheckpoint, ref)
        values = {
            "session.created_at": (stored.created_at, at_plus_14),
            "session.updated_at": (stored.updated_at, at_plus_14),
            "message.created_at": (kept.created_at, at_minus_12),
            "step.started_at": (step.started_at, at_plus_14),
            "step.ended_at": (step.ended_at, at_plus_14 + timedelta(microseconds=1)),
            "grant.granted_at": (grant.granted_at, at_minus_12),
            "grant.expires_at": (grant.expires_at, at_minus_12 + timedelta(days=1)),
            "checkpoint.created_at": (checkpoint.created_at, at_plus_14),
            "checkpoint.expires_at": (checkpoint.expires_at, at_plus_14 + timedelta(hours=1)),
        }
    for name, (got, expected) in values.items():
        assert got is not None, name
        assert got == expected, name
        assert _is_utc(got), name
        assert got.microsecond == expected.astimezone(UTC).microsecond, name


def test_a_utc_datetime_is_stored_as_utc_wall_clock(engine: Engine) -> None:
    sid = _id("wall")
    _insert(engine, new_session(sid, at=datetime(2026, 3, 4, 5, 6, 7, 1, tzinfo=PLUS_14)))
    with Session(engine) as session:
        stored = session.get_one(AgentSession, sid).created_at
    assert (stored.year, stored.month, stored.day, stored.hour) == (2026, 3, 3, 15)


@pytest.mark.parametrize("where", ["session", "message"])
def test_a_naive_datetime_is_refused(engine: Engine, where: str) -> None:
    sid = _id("naive")
    naive = datetime(2026, 3, 4, 5, 6, 7)
    if where == "session":
        rows: tuple[Any, ...] = (new_session(sid, at=naive),)
    else:
        message = new_message(sid, 1)
        message.created_at = naive
        rows = (new_session(sid), message)

    with pytest.raises(StatementError) as caught:
        _insert(engine, *rows)

    assert isinstance(caught.value.orig, ValidationError)
    with Session(engine) as session:
        assert session.get(AgentSession, sid) is None


def _same_json(got: Any, expected: Any, *, signed_zero: bool) -> None:
    assert got == expected
    if signed_zero:
        assert math.copysign(1.0, got["negative_zero"]) == -1.0


def test_json_comes_back_equal_in_every_json_column(engine: Engine, migrated_url: URL) -> None:
    sid, ref = _id("json"), _id("ref")
    at = datetime(2026, 1, 1, tzinfo=UTC)
    session_row = new_session(sid, state=DOCUMENT)
    session_row.last_run = DOCUMENT
    message = new_message(sid, 1, content=DOCUMENT)
    message.metadata_ = DOCUMENT
    _insert(
        engine, session_row, message, _step(sid, at, DOCUMENT), _checkpoint(sid, ref, at, DOCUMENT)
    )

    with Session(engine) as session:
        stored = session.get_one(AgentSession, sid)
        kept = session.scalars(select(AgentMessage).where(AgentMessage.session_id == sid)).one()
        step = session.scalars(select(AgentStep).where(AgentStep.session_id == sid)).one()
        checkpoint = session.get_one(AgentCheckpoint, ref)
    # State is JSONB on PostgreSQL, a number type without a negative zero; the rest is text.
    jsonb = migrated_url.get_backend_name() == "postgresql"
    _same_json(stored.state, DOCUMENT, signed_zero=not jsonb)
    for value in (
        stored.last_run,
        kept.content,
        kept.metadata_,
        step.input,
        step.output,
        step.tool_calls,
        checkpoint.payload,
    ):
        _same_json(value, DOCUMENT, signed_zero=True)
    assert step.usage_extra == {"cached": 2**63 - 1}
    assert (step.input_tokens, step.total_tokens) == (2**63 - 1, 2**63 - 1)


def test_json_scalars_and_null_round_trip_as_message_content(engine: Engine) -> None:
    sid = _id("scalar")
    contents: list[Any] = ["plain text", 42, None, [], "", "😀" * 1000]
    _insert(engine, new_session(sid), *[new_message(sid, i + 1, c) for i, c in enumerate(contents)])

    with Session(engine) as session:
        query = select(AgentMessage.content).where(AgentMessage.session_id == sid)
        stored = list(session.scalars(query.order_by(AgentMessage.seq)))
    assert stored == contents


def test_ids_that_differ_only_in_case_are_two_sessions(engine: Engine) -> None:
    suffix = uuid.uuid4().hex[:8]
    upper, lower = f"Session-1-{suffix}", f"session-1-{suffix}"
    _insert(engine, new_session(upper), new_session(lower))

    with Session(engine) as session:
        assert session.get_one(AgentSession, upper).id == upper
        assert session.get_one(AgentSession, lower).id == lower
        shouting = select(func.count()).where(AgentSession.id == upper.upper())
        assert session.scalar(shouting) == 0


def test_refs_that_differ_only_in_case_are_two_checkpoints(engine: Engine) -> None:
    sid, ref = _id("refs"), _id("Ref")
    at = datetime(2026, 1, 1, tzinfo=UTC)
    first, second = _checkpoint(sid, ref, at), _checkpoint(sid, ref.lower(), at)
    second.seq = 2
    _insert(engine, new_session(sid), first, second)

    with Session(engine) as session:
        query = select(AgentCheckpoint.ref).where(AgentCheckpoint.session_id == sid)
        assert set(session.scalars(query)) == {ref, ref.lower()}


def test_capabilities_are_compared_exactly(engine: Engine) -> None:
    sid = _id("caps")
    at = datetime(2026, 1, 1, tzinfo=UTC)
    long_capability = "shell:" + "ä" * 4090
    _insert(
        engine,
        new_session(sid),
        _grant(sid, "Read:/tmp", at),
        _grant(sid, "read:/tmp", at),
        _grant(sid, long_capability, at),
    )

    with Session(engine) as session:
        mine = select(AgentGrant.capability).where(AgentGrant.session_id == sid)
        assert list(session.scalars(mine.where(AgentGrant.capability == "read:/tmp"))) == [
            "read:/tmp"
        ]
        assert list(session.scalars(mine.where(AgentGrant.capability == "READ:/TMP"))) == []
        assert long_capability in set(session.scalars(mine))
    assert len(long_capability) == 4096
