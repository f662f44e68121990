"""Writers in separate processes appending to one ADK session: each event is accepted
only on top of the state its writer read, the others get StaleSessionError."""

from __future__ import annotations

import asyncio
import multiprocessing

import pytest

from agentledger.integrations.adk import LedgerSessionService

from ._writer import APP, SESSION, USER, write

WRITERS = 8
ROUNDS = 5


async def _create(url: str) -> None:
    async with LedgerSessionService(url) as service:
        await service.create_session(
            app_name=APP, user_id=USER, session_id=SESSION, state={"total": 0}
        )


async def _totals(url: str) -> tuple[list[int], int]:
    async with LedgerSessionService(url) as service:
        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
    assert session is not None
    return [e.actions.state_delta["total"] for e in session.events], session.state["total"]


@pytest.mark.slow
@pytest.mark.databases("sqlite", "postgresql")
def test_no_writer_is_accepted_on_top_of_state_it_had_not_seen(shared_url: str) -> None:
    asyncio.run(_create(shared_url))
    fork = multiprocessing.get_context("fork")
    barrier, results = fork.Barrier(WRITERS), fork.Queue()
    workers = [
        fork.Process(target=write, args=(shared_url, index, ROUNDS, barrier, results))
        for index in range(WRITERS)
    ]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=300) for _ in workers]
    assert all(isinstance(outcome, int) for outcome in outcomes), outcomes
    stale = sum(int(outcome) for outcome in outcomes)
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    totals, total = asyncio.run(_totals(shared_url))
    assert totals == list(range(1, WRITERS * ROUNDS + 1))
    assert total == WRITERS * ROUNDS
    assert stale > 0, "no writer was ever refused: the test produced no contention"
