"""A writer process for the concurrency test: read the session, append an event whose
state delta counts one more, reread and retry on StaleSessionError.

Writers are forked from the test (so none pays for importing ADK again); each waits
at a barrier, so all of them start at once, and puts how many of its appends were
refused as stale on a queue.
"""

from __future__ import annotations

import asyncio
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier

from google.adk.errors import StaleSessionError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig

from agentledger.integrations.adk import LedgerSessionService

APP, USER, SESSION = "counter", "ada", "shared"


async def _write(url: str, index: int, rounds: int, barrier: Barrier) -> int:
    stale = 0
    async with LedgerSessionService(url) as service:
        await service.get_user_state(app_name=APP, user_id=USER)  # connect before the start
        barrier.wait()
        for _ in range(rounds):
            while True:
                session = await service.get_session(
                    app_name=APP,
                    user_id=USER,
                    session_id=SESSION,
                    config=GetSessionConfig(num_recent_events=0),
                )
                assert session is not None
                delta = {"total": session.state["total"] + 1}
                event = Event(author=f"w{index}", actions=EventActions(state_delta=delta))
                try:
                    await service.append_event(session, event)
                    break
                except StaleSessionError:
                    stale += 1
    return stale


def write(url: str, index: int, rounds: int, barrier: Barrier, results: Queue[int | str]) -> None:
    """Append ``rounds`` events as writer ``index``; put the number refused as stale (or
    the error that stopped the writer, so the test fails instead of waiting)."""
    try:
        results.put(asyncio.run(_write(url, index, rounds, barrier)))
    except BaseException as error:
        results.put(f"writer {index}: {error!r}")
        raise
