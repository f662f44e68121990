"""An ADK Runner on LedgerSessionService: a scripted model (no network) calls a tool
that changes state in every scope, and a new process resumes the conversation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentledger import AsyncLedger
from agentledger.integrations.adk import LedgerSessionService

from ._agent import APP, SESSION, USER, ScriptedModel, turn

ROOT = Path(__file__).resolve().parents[3]
AFTER_ONE_BOOKING = {
    "booked": "Porto",
    "last_answer": 'Booked: {"destination": "Porto", "seat": "12A"}',
    "user:home": "Porto",
    "app:bookings": 1,
}


async def test_a_turn_with_a_tool_call_stores_its_events_and_each_scopes_state(
    service: LedgerSessionService, ledger: AsyncLedger
) -> None:
    await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    answers = await turn(service, ScriptedModel(model="scripted"), "please book a train")
    session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
    assert session is not None
    assert answers == [AFTER_ONE_BOOKING["last_answer"]]
    assert [e.author for e in session.events] == ["user", "planner", "planner", "planner"]
    assert session.state == AFTER_ONE_BOOKING
    assert (await ledger.app_state.get(APP)).state == {"bookings": 1}
    assert (await ledger.user_state.get(APP, USER)).state == {"home": "Porto"}
    assert not any("temp:" in key for e in session.events for key in e.actions.state_delta)


def _turn_in_a_new_process(url: str, text: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.integrations.adk._agent", url, text],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.slow
async def test_a_new_process_resumes_the_conversation_and_its_state(shared_url: str) -> None:
    async with LedgerSessionService(shared_url) as service:
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        await turn(service, ScriptedModel(model="scripted"), "please book a train")
    resumed = _turn_in_a_new_process(shared_url, "book another one")
    assert resumed["seen"] == [
        [
            "user: please book a train",
            "model: call book_train",
            "user: result of book_train",
            'model: Booked: {"destination": "Porto", "seat": "12A"}',
            "user: book another one",
        ],
        [
            "user: please book a train",
            "model: call book_train",
            "user: result of book_train",
            'model: Booked: {"destination": "Porto", "seat": "12A"}',
            "user: book another one",
            "model: call book_train",
            "user: result of book_train",
        ],
    ]
    assert resumed["state"] == {**AFTER_ONE_BOOKING, "app:bookings": 2}
