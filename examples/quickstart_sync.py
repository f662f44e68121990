"""agentledger quickstart (sync): the same as quickstart_async.py, without await.

One turn of an agent loop: the user asks, the model wants a tool that needs the
user's approval, so the run pauses with a checkpoint and ends. A new process then
reopens the database, the user approves, and the run resumes from the checkpoint.
Run it twice: the second run finds the conversation and the approval, and goes on.

    python examples/quickstart_sync.py [DATABASE_URL]     (default sqlite:///agentledger.db)
"""

from __future__ import annotations

import sys
from typing import Any

from agentledger import (
    CheckpointPayload,
    Ledger,
    NewMessage,
    NewStep,
    PendingToolCall,
    RunSummary,
    TokenUsage,
)

SESSION, TOOL = "trip-planner", "tool:museum-search"
QUESTIONS = ["Which museums are open on Monday?", "And on Tuesday?"]


def fake_model(turn: int) -> tuple[dict[str, Any], TokenUsage]:
    """Stands in for a model call: the tool call it asks for, and its token usage."""
    call = {"id": f"call-{turn}", "name": "museum_search", "arguments": {"day": turn}}
    return call, TokenUsage(input_tokens=40 * turn, output_tokens=12, total_tokens=40 * turn + 12)


def run_tool_and_answer(ledger: Ledger, call: dict[str, Any]) -> None:
    """The rest of the turn: run the approved tool, answer, record the run's outcome."""
    result = f"Open on day {call['arguments']['day']}: Gulbenkian, MAAT"
    ledger.steps.append(SESSION, NewStep(kind="tool", name=call["name"], output=result))
    session = ledger.sessions.get(SESSION)
    ledger.messages.append(
        session,
        [
            NewMessage(role="tool", content=result, metadata={"tool_call_id": call["id"]}),
            NewMessage(role="assistant", content=f"Good news: {result}."),
        ],
    )
    ledger.sessions.finalize(SESSION, RunSummary(status="completed", model="demo"))


def start_turn(url: str | None) -> bool:
    """The user asks; returns whether the run paused for an approval."""
    with Ledger(url) as ledger:
        ledger.upgrade()  # creates or updates the tables (Alembic migrations)
        session, created = ledger.sessions.get_or_create(
            SESSION, user_id="ada", title="Planning a trip to Lisbon"
        )
        print("created" if created else "found", f"session {session.id}", end=" ")
        print(f"with {session.message_count} messages at revision {session.revision}")

        turn = session.state.get("turns", 0) + 1
        question = QUESTIONS[min(turn, len(QUESTIONS)) - 1]
        # Appending from the record is optimistic: had another writer changed the
        # session since it was read, ConflictError would be raised, nothing stored.
        asked = ledger.messages.append(session, NewMessage(role="user", content=question))
        session = asked.session  # at its new revision; asked.messages has the seqs
        call, usage = fake_model(turn)
        ledger.steps.append(SESSION, NewStep(kind="model", model="demo", usage=usage))
        session = ledger.messages.append(
            session, NewMessage(role="assistant", content="", metadata={"tool_call": call})
        ).session
        ledger.sessions.save(session.model_copy(update={"state": {"turns": turn}}))

        if ledger.grants.is_granted(SESSION, TOOL):
            print(f"turn {turn}: {TOOL} was approved before; no need to ask again")
            run_tool_and_answer(ledger, call)
            return False
        # Pause: everything the run needs to resume, in one checkpoint.
        pause = CheckpointPayload(
            context_window=ledger.messages.last(SESSION, 20),
            pending_tool_calls={call["id"]: PendingToolCall(tool_call=call, interrupt_active=True)},
            interrupt_requesters={f"approve-{call['id']}": "ada"},
            runtime_state={"turn": turn},
        )
        checkpoint = ledger.checkpoints.save(SESSION, pause)
        ledger.sessions.finalize(SESSION, RunSummary(status="interrupted", usage=usage))
        print(f"turn {turn}: the model wants {TOOL}; paused at checkpoint #{checkpoint.seq}")
        return True


def resume_turn(url: str | None) -> None:
    """A new process (or a restart) opens the database and resumes the paused run."""
    with Ledger(url) as ledger:
        paused = ledger.checkpoints.latest(SESSION)
        assert paused is not None
        ((call_id, pending),) = paused.payload.pending_tool_calls.items()
        ledger.grants.grant(SESSION, TOOL, granted_by="ada")  # the user says yes
        # Resuming is a compare-and-set on the checkpoint: of two processes resuming the
        # same pause, exactly one gets past this line; the other gets ConflictError.
        resumed = paused.payload.model_copy(update={"pending_tool_calls": {}})
        ledger.checkpoints.save(SESSION, resumed, parent=paused.ref)
        print(f"resumed from checkpoint #{paused.seq}: ada approved {TOOL} for {call_id}")
        run_tool_and_answer(ledger, pending.tool_call)


def show(url: str | None) -> None:
    with Ledger(url) as ledger:
        for message in ledger.messages.last(SESSION, 2):
            print(f"  #{message.seq} {message.role}: {message.content}")
        print(
            f"  {'session':<14} {'title':<28} {'status':<10} {'msgs':>4} {'steps':>5} {'tokens':>6}"
        )
        for item in (ledger.sessions.list(user_id="ada", limit=10)).items:
            print(
                f"  {item.id:<14} {item.title or '':<28} {item.status:<10} "
                f"{item.message_count:>4} {item.step_count:>5} {item.total_tokens:>6}"
            )


def main(url: str | None = None) -> None:
    if start_turn(url):
        resume_turn(url)
    show(url)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
