"""The capability probe: what agentledger relies on, checked once per backend at start.

Conflict detection needs an UPDATE to report the rows it *matched* (an engine built
with a custom ``creator=`` on MySQL loses CLIENT_FOUND_ROWS and reports 0 for an
UPDATE that writes the same values); ordering and expiry need microsecond UTC
timestamps; payloads need JSON to come back as stored. The probe writes one scratch
session in a transaction that is always rolled back, so it leaves nothing behind.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, cast

from sqlalchemy import Connection, Table, insert, select, update

from .errors import DatabaseError
from .models import AgentSession
from .models.types import json_text

_SESSIONS = cast(Table, AgentSession.__table__)
PROBE_ID = ".agentledger-probe"  # starts with "." so it can never be a real session id
PROBE_TIME = datetime(2000, 1, 2, 3, 4, 5, 123456, tzinfo=timezone(timedelta(hours=14)))
PROBE_STATE: dict[str, Any] = {"big": 2**63 - 1, "negative_zero": -0.0, "text": "é ✓ 🚀", "n": [1]}


def probe(connection: Connection) -> None:
    """Raise DatabaseError naming the first capability the backend lacks."""
    transaction = connection.begin_nested() if connection.in_transaction() else connection.begin()
    try:
        _check(connection)
    finally:
        transaction.rollback()


def _refuse(what: str, connection: Connection) -> DatabaseError:
    dialect = connection.dialect
    return DatabaseError(
        f"the {dialect.name} backend ({dialect.driver}) failed agentledger's capability "
        f"probe: {what}"
    )


def _check(connection: Connection) -> None:
    row: dict[str, Any] = {
        column.name: 0 for column in _SESSIONS.c if column.name.endswith(("_count", "_seq"))
    }
    row.update(
        id=PROBE_ID,
        status="active",
        state=PROBE_STATE,
        input_tokens=0,
        output_tokens=0,
        total_tokens=0,
        created_at=PROBE_TIME,
        updated_at=PROBE_TIME,
        revision=1,
    )
    connection.execute(insert(_SESSIONS).values(row))
    same = update(_SESSIONS).where(_SESSIONS.c.id == PROBE_ID).values(status="active")
    matched = connection.execute(same).rowcount
    if matched != 1:
        raise _refuse(
            f"an UPDATE that matched one row without changing it reported {matched} rows, so "
            "concurrent writers could not be detected (on MySQL/MariaDB, a custom creator= "
            "must pass client_flag=CLIENT.FOUND_ROWS)",
            connection,
        )
    stored = connection.execute(
        select(_SESSIONS.c.created_at, json_text(_SESSIONS.c.state)).where(
            _SESSIONS.c.id == PROBE_ID
        )
    ).one()
    created_at, state_text = stored
    if (
        created_at != PROBE_TIME
        or created_at.tzinfo is None
        or created_at.utcoffset() != UTC.utcoffset(None)
    ):
        raise _refuse(
            f"the timestamp {PROBE_TIME.isoformat()} came back as {created_at!r}: UTC "
            "microseconds are not kept",
            connection,
        )
    if json.loads(state_text) != PROBE_STATE:
        raise _refuse(f"JSON came back changed: {state_text!r}", connection)
