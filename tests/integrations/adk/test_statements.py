"""How many statements one ``append_event`` sends, on every backend.

Counted with a ``before_cursor_execute`` listener on the ledger's engine, leaving out
transaction control (SQLite's ``BEGIN IMMEDIATE`` goes through the cursor; the other
BEGINs and every COMMIT do not). These are what ``docs/benchmarks.md`` states for the
side-by-side benchmark; a change that adds a round trip to an event shows up here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.genai import types
from sqlalchemy import event

from agentledger import AsyncLedger
from agentledger.integrations.adk import LedgerSessionService


@contextmanager
def _statements(ledger: AsyncLedger) -> Iterator[list[str]]:
    seen: list[str] = []
    engine = ledger.engine.sync_engine

    def record(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        if not statement.startswith("BEGIN"):
            seen.append(" ".join(statement.split()))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _event(n: int, *, scoped: bool) -> Event:
    delta = {"turn": n, "user:seen": n, "app:replies": n, "temp:scratch": n}
    return Event(
        author="planner",
        invocation_id=f"inv-{n}",
        content=types.Content(role="model", parts=[types.Part(text=f"reply {n}")]),
        actions=EventActions(state_delta=delta if scoped else {}),
    )


async def test_an_event_with_state_in_every_scope_is_one_read_and_one_write_per_row(
    ledger: AsyncLedger, service: LedgerSessionService
) -> None:
    session = await service.create_session(app_name="app", user_id="ana", session_id="s")
    await service.append_event(session, _event(0, scoped=True))  # the scope rows exist now
    with _statements(ledger) as seen:
        await service.append_event(session, _event(1, scoped=True))
    dialect = ledger.engine.dialect.name
    # The event id's look-up and both scope rows: one unlocked SELECT. Then the
    # session's versioned UPDATE and the message's INSERT (one statement on PostgreSQL;
    # on MariaDB the session row is read back, having no UPDATE ... RETURNING), then
    # one versioned UPDATE per scope.
    expected = {"postgresql": 4, "sqlite": 5, "mysql": 6}[dialect]
    assert len(seen) == expected, seen
    assert "UNION ALL" in seen[0]
    assert not any("FOR UPDATE" in statement for statement in seen), seen
    stored = await service.get_session(app_name="app", user_id="ana", session_id="s")
    assert stored is not None
    assert (stored.state["turn"], stored.state["user:seen"], stored.state["app:replies"]) == (
        1,
        1,
        1,
    )
    assert "temp:scratch" not in stored.state


async def test_a_plain_event_is_the_key_look_up_and_the_versioned_write(
    ledger: AsyncLedger, service: LedgerSessionService
) -> None:
    session = await service.create_session(app_name="app", user_id="ana", session_id="s")
    await service.append_event(session, _event(0, scoped=False))
    with _statements(ledger) as seen:
        await service.append_event(session, _event(1, scoped=False))
    # The event id's look-up, then the versioned UPDATE and the INSERT (one statement on
    # PostgreSQL; on MariaDB with the session row read back).
    expected = {"postgresql": 2, "sqlite": 3, "mysql": 4}[ledger.engine.dialect.name]
    assert len(seen) == expected, seen
