"""One session at a glance: its row, conversation, recent steps, grants and checkpoints,
read in one read transaction so the parts agree with each other."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._stores import Store, open_async_store, open_store, run_in_greenlet
from .errors import ValidationError
from .records import CheckpointInfo, Grant, Message, Record, SessionRecord, Step
from .repositories import (
    CheckpointRepository,
    GrantRepository,
    MessageRepository,
    SessionRepository,
    StepRepository,
)

if TYPE_CHECKING:
    from .ledger import AsyncLedger, Ledger

MAX_ITEMS = 10_000


class SessionOverview(Record):
    """A session with the newest of each of its parts (each list in seq order, except
    checkpoints: newest first, unexpired only)."""

    session: SessionRecord
    messages: list[Message]
    steps: list[Step]
    grants: list[Grant]
    """The unexpired grants."""
    checkpoints: list[CheckpointInfo]


def _limit(value: object, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_ITEMS:
        raise ValidationError(f"{name} must be an int from 0 to {MAX_ITEMS}", path=name)
    return value


def _overview(
    store: Store, id: str, messages: int, steps: int, checkpoints: int
) -> SessionOverview:
    with store.transaction(writes=False) as work:
        record = SessionRepository(work).get(id)
        return SessionOverview(
            session=record,
            messages=MessageRepository(work).last(id, messages) if messages else [],
            steps=StepRepository(work).last(id, steps) if steps else [],
            grants=GrantRepository(work).active(id),
            checkpoints=CheckpointRepository(work).list(id, limit=checkpoints).items
            if checkpoints
            else [],
        )


def session_overview(
    ledger: Ledger, id: str, *, messages: int = 1000, steps: int = 50, checkpoints: int = 20
) -> SessionOverview:
    """Session ``id`` with its last ``messages`` messages, last ``steps`` steps, active
    grants and newest ``checkpoints`` unexpired checkpoints (each 0 to 10,000; 0 skips;
    checkpoints at most 1,000).

    Raises:
        NotFoundError: no such session.
    """
    limits = (
        _limit(messages, "messages"),
        _limit(steps, "steps"),
        _limit(checkpoints, "checkpoints"),
    )
    return _overview(open_store(ledger), id, *limits)


async def asession_overview(
    ledger: AsyncLedger, id: str, *, messages: int = 1000, steps: int = 50, checkpoints: int = 20
) -> SessionOverview:
    """``session_overview`` for an AsyncLedger."""
    limits = (
        _limit(messages, "messages"),
        _limit(steps, "steps"),
        _limit(checkpoints, "checkpoints"),
    )
    store = await open_async_store(ledger)
    return await run_in_greenlet(_overview, store, id, *limits)
