"""One ``LedgerSessionService`` shared by threads, each on an event loop of its own (an
ADK server's worker threads), and used by ``asyncio.run`` after ``asyncio.run``: every
acknowledged event is stored once, nothing hangs."""

from __future__ import annotations

import asyncio

from agentledger import AsyncLedger
from agentledger.integrations.adk import LedgerSessionService

from ...loops import in_threads, one_after_another
from .test_service_contract import APP, T0, USER, event

THREADS, EVENTS = 5, 6


def test_threads_each_on_its_own_loop_append_events_through_one_service(
    each_database: str,
) -> None:
    ledger = AsyncLedger(each_database)
    service = LedgerSessionService(ledger)

    async def converse(i: int) -> int:
        session = await service.create_session(app_name=APP, user_id=USER, session_id=f"s{i}")
        for n in range(EVENTS):
            await service.append_event(session, event(f"t{i} e{n}", at=T0 + n))
        return EVENTS

    assert sum(in_threads(THREADS, converse)) == THREADS * EVENTS

    async def stored(i: int) -> list[str]:
        found = await service.get_session(app_name=APP, user_id=USER, session_id=f"s{i}")
        assert found is not None
        return [str(e.content.parts[0].text) for e in found.events if e.content and e.content.parts]

    for i in range(THREADS):
        assert asyncio.run(stored(i)) == [f"t{i} e{n}" for n in range(EVENTS)]
    asyncio.run(ledger.close())


def test_one_service_serves_asyncio_run_after_asyncio_run(each_database: str) -> None:
    ledger = AsyncLedger(each_database)
    service = LedgerSessionService(ledger)

    async def turn(i: int) -> int:
        if i == 0:
            await service.create_session(app_name=APP, user_id=USER, session_id="runs")
        session = await service.get_session(app_name=APP, user_id=USER, session_id="runs")
        assert session is not None
        await service.append_event(session, event(f"r{i}", at=T0 + i))
        return len(session.events)

    assert one_after_another(3, turn) == [1, 2, 3]
    asyncio.run(ledger.close())
