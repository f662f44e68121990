"""agentledger quickstart (async): a conversation that outlives the process.

One turn of an agent loop: the user asks, the model wants a tool that needs the
user's approval, so the run pauses with a checkpoint and ends. A new process then
reopens the database, the user approves, and the run resumes from the checkpoint.
Run it twice: the second run finds the conversation and the approval, and goes on.

    python examples/quickstart_async.py [DATABASE_URL]     (default sqlite:///agentledger.db)
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from agentledger import (
    AsyncLedger,
    CheckpointPayload,
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


async def run_tool_and_answer(ledger: AsyncLedger, call: dict[str, Any]) -> None:
    """The rest of the turn: run the approved tool, answer, record the run's outcome."""
    result = f"Open on day {call['arguments']['day']}: Gulbenkian, MAAT"
    await ledger.steps.append(SESSION, NewStep(kind="tool", name=call["name"], output=result))
    session = await ledger.sessions.get(SESSION)
    await ledger.messages.append(
        session,
        [
            NewMessage(role="tool", content=result, metadata={"tool_call_id": call["id"]}),
            NewMessage(role="assistant", content=f"Good news: {result}."),
        ],
    )
    await ledger.sessions.finalize(SESSION, RunSummary(status="completed", model="demo"))


async def start_turn(url: str | None) -> bool:
    """The user asks; returns whether the run paused for an approval."""
    async with AsyncLedger(url) as ledger:
        await ledger.upgrade()  # creates or updates the tables (Alembic migrations)
        session, created = await ledger.sessions.get_or_create(
            SESSION, user_id="ada", title="Planning a trip to Lisbon"
        )
        print("created" if created else "found", f"session {session.id}", end=" ")
        print(f"with {session.message_count} messages at revision {session.revision}")

        turn = session.state.get("turns", 0) + 1
        question = QUESTIONS[min(turn, len(QUESTIONS)) - 1]
        # Appending from the record is optimistic: had another writer changed the
        # session since it was read, ConflictError would be raised, nothing stored.
        asked = await ledger.messages.append(session, NewMessage(role="user", content=question))
        session = asked.session  # at its new revision; asked.messages has the seqs
        call, usage = fake_model(turn)
        await ledger.steps.append(SESSION, NewStep(kind="model", model="demo", usage=usage))
        answered = await ledger.messages.append(
            session, NewMessage(role="assistant", content="", metadata={"tool_call": call})
        )
        session = answered.session
        await ledger.sessions.save(session.model_copy(update={"state": {"turns": turn}}))

        if await ledger.grants.is_granted(SESSION, TOOL):
            print(f"turn {turn}: {TOOL} was approved before; no need to ask again")
            await run_tool_and_answer(ledger, call)
            return False
        # Pause: everything the run needs to resume, in one checkpoint.
        pause = CheckpointPayload(
            context_window=await ledger.messages.last(SESSION, 20),
            pending_tool_calls={call["id"]: PendingToolCall(tool_call=call, interrupt_active=True)},
            interrupt_requesters={f"approve-{call['id']}": "ada"},
            runtime_state={"turn": turn},
        )
        checkpoint = await ledger.checkpoints.save(SESSION, pause)
        await ledger.sessions.finalize(SESSION, RunSummary(status="interrupted", usage=usage))
        print(f"turn {turn}: the model wants {TOOL}; paused at checkpoint #{checkpoint.seq}")
        return True


async def resume_turn(url: str | None) -> None:
    """A new process (or a restart) opens the database and resumes the paused run."""
    async with AsyncLedger(url) as ledger:
        paused = await ledger.checkpoints.latest(SESSION)
        assert paused is not None
        ((call_id, pending),) = paused.payload.pending_tool_calls.items()
        await ledger.grants.grant(SESSION, TOOL, granted_by="ada")  # the user says yes
        # Resuming is a compare-and-set on the checkpoint: of two processes resuming the
        # same pause, exactly one gets past this line; the other gets ConflictError.
        resumed = paused.payload.model_copy(update={"pending_tool_calls": {}})
        await ledger.checkpoints.save(SESSION, resumed, parent=paused.ref)
        print(f"resumed from checkpoint #{paused.seq}: ada approved {TOOL} for {call_id}")
        await run_tool_and_answer(ledger, pending.tool_call)


async def show(url: str | None) -> None:
    async with AsyncLedger(url) as ledger:
        for message in await ledger.messages.last(SESSION, 2):
            print(f"  #{message.seq} {message.role}: {message.content}")
        print(
            f"  {'session':<14} {'title':<28} {'status':<10} {'msgs':>4} {'steps':>5} {'tokens':>6}"
        )
        for item in (await ledger.sessions.list(user_id="ada", limit=10)).items:
            print(
                f"  {item.id:<14} {item.title or '':<28} {item.status:<10} "
                f"{item.message_count:>4} {item.step_count:>5} {item.total_tokens:>6}"
            )


async def main(url: str | None = None) -> None:
    if await start_turn(url):
        await resume_turn(url)
    await show(url)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
