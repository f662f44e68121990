"""A ledger the viewer's tests look at: a session of each framework (made through the
ledger API with the integrations' ids and keys, no framework imported), one of
agentledger's own with hostile content everywhere, steps of several models and users on
known days, a checkpoint tree with a fork, grants, and app and user state."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agentledger import (
    CheckpointPayload,
    Ledger,
    NewMessage,
    NewStep,
    PendingToolCall,
    RunSummary,
    TokenUsage,
)
from agentledger.integrations import new_session_id

START = datetime(2026, 11, 20, 9, 0, 0, tzinfo=UTC)
NOW = datetime(2026, 11, 28, 12, 0, 0, tzinfo=UTC)
"""The viewer's "now" in these tests: the usage page's period ends here."""
HOSTILE = '<script>alert("x")</script>"><img src=x onerror=alert(1)>{{7*7}}\x1b[31m\u202e'
"""Markup, a script, a template expression, a terminal escape and a bidi override."""


class Clock:
    """A clock that moves one minute per reading, from ``START``."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        self.now += timedelta(minutes=1)
        return self.now


def usage(total: int) -> TokenUsage:
    """Token counts with the given total (a quarter of it output)."""
    return TokenUsage(input_tokens=total - total // 4, output_tokens=total // 4, total_tokens=total)


def step(kind: str, *, day: int, tokens: int = 0, **fields: object) -> NewStep:
    """A step started at 10:00 UTC on November ``day``, taking 2.5 s."""
    started = datetime(2026, 11, day, 10, 0, 0, tzinfo=UTC)
    return NewStep(
        kind=kind,
        usage=usage(tokens),
        started_at=started,
        ended_at=started + timedelta(seconds=2.5),
        **fields,
    )


def fill(ledger: Ledger) -> dict[str, str]:
    """The sessions the tests expect, by role: ``plain``, ``hostile``,
    ``tool-in-metadata``, ``langgraph``, ``openai-agents``, ``adk``; returns their ids."""
    ids: dict[str, str] = {}
    trip = ledger.sessions.create(
        "trip-lisbon", app_name="travel", user_id="ada", title="Plan a trip to Lisbon"
    )
    trip = ledger.messages.append(
        trip,
        [
            NewMessage(role="user", content="Which museums are open on Monday?"),
            NewMessage(
                role="assistant",
                content={
                    "content": "Let me look that up.",
                    "tool_calls": [{"id": "call-1", "name": "museum_search", "arguments": "{}"}],
                },
            ),
            NewMessage(role="tool", content="Open on Monday: Gulbenkian, MAAT"),
            NewMessage(role="assistant", content="Good news: the Gulbenkian is open."),
        ],
    ).session
    ledger.steps.append(
        trip.id,
        [
            step("model", day=26, tokens=1_000, model="m-big"),
            step("tool", day=26, name="museum_search"),
            step("model", day=27, tokens=400, model="m-small"),
        ],
    )
    ledger.grants.grant(trip.id, "tool:museum-search", granted_by="ada")
    paused = ledger.checkpoints.save(trip.id, CheckpointPayload(runtime_state={"phase": "ask"}))
    ledger.checkpoints.save(trip.id, CheckpointPayload(runtime_state={"phase": "resumed"}))
    waiting = PendingToolCall(
        tool_call={"id": "call-2", "name": "book_tickets", "arguments": {"museum": "MAAT"}},
        interrupt_active=True,
    )
    ledger.checkpoints.fork(
        trip.id,
        paused.ref,
        CheckpointPayload(
            pending_tool_calls={"call-2": waiting}, interrupt_requesters={"call-2": "ada"}
        ),
    )
    ledger.sessions.finalize(trip.id, RunSummary(status="completed", model="m-big"))
    ids["plain"] = trip.id

    hostile = ledger.sessions.create("hostile-1", app_name="red team", user_id="eve", title=HOSTILE)
    ledger.messages.append(
        hostile,
        [
            NewMessage(role="user", content=f"opening {HOSTILE}"),
            NewMessage(
                role=f"agent{HOSTILE}",
                content={"text": HOSTILE, "tool_calls": [{"name": HOSTILE, "arguments": HOSTILE}]},
            ),
        ],
    )
    ledger.steps.append(
        hostile.id, step("tool", day=27, name=HOSTILE, input={"q": HOSTILE}, error=HOSTILE)
    )
    ledger.grants.grant(hostile.id, f"tool:{HOSTILE}", granted_by=HOSTILE)
    ids["hostile"] = hostile.id

    # The quickstart's shape: the model's tool call and the tool's answer in metadata.
    asked = ledger.sessions.create("trip-planner", user_id="ada", title="Planning a trip")
    call = {"id": "call-1", "name": "museum_search", "arguments": {"day": 1}}
    ledger.messages.append(
        asked,
        [
            NewMessage(role="user", content="Which museums are open on Monday?"),
            NewMessage(role="assistant", content="", metadata={"tool_call": call}),
            NewMessage(
                role="tool", content="Open on day 1: MAAT", metadata={"tool_call_id": "call-1"}
            ),
        ],
    )
    # A step that recorded no end (so no duration), before the usage tests' week.
    untimed = NewStep(kind="model", model="demo", started_at=datetime(2026, 11, 20, 10, tzinfo=UTC))
    ledger.steps.append(asked.id, untimed)
    ids["tool-in-metadata"] = asked.id

    frameworks = {
        "langgraph": ("support", "bob", "thread-7", "Reset my password"),
        "openai-agents": ("support", "carol", "conv_100%_sure", "Refund for order 42"),
        "adk": ("weather_app", "ada", "adk-session-1", None),
    }
    for framework, (app, user, key, title) in frameworks.items():
        record, _ = ledger.sessions.get_or_create_by_key(
            key,
            app_name=app,
            user_id=user,
            id=new_session_id(framework),
            title=title,
        )
        ledger.messages.append(
            record,
            NewMessage(role="user", content={"parts": [{"text": f"Hello from {framework}"}]}),
        )
        ledger.steps.append(record.id, step("model", day=28, tokens=100, model="m-small"))
        ids[framework] = record.id
    ledger.app_state.merge("weather_app", {"set": {"units": "metric"}})
    ledger.user_state.merge("weather_app", "ada", {"set": {"home": "Porto"}})
    return ids
