"""agentledger quickstart (async): a conversation that outlives the process.

Run it twice: the second run finds the conversation the first one left and continues.

    python examples/quickstart_async.py [DATABASE_URL]     (default sqlite:///agentledger.db)
"""

from __future__ import annotations

import asyncio
import sys

from agentledger import AsyncLedger, Message, NewMessage, NewStep, RunSummary, TokenUsage


def fake_model(history: list[Message]) -> tuple[str, TokenUsage]:
    """Stands in for a model call: answers the last user message, reports token usage."""
    question = history[-1].content
    usage = TokenUsage(
        input_tokens=12 * len(history), output_tokens=20, total_tokens=12 * len(history) + 20
    )
    return f"(answer {len(history) // 2 + 1}) You asked: {question!r}", usage


async def main(url: str | None = None) -> None:
    async with AsyncLedger(url) as ledger:
        await ledger.upgrade()  # creates or updates the tables (Alembic migrations)

        session, created = await ledger.sessions.get_or_create(
            "trip-planner", user_id="ada", title="Planning a trip to Lisbon"
        )
        print("created" if created else "found", f"session {session.id}", end=" ")
        print(f"with {session.message_count} messages at revision {session.revision}")

        # One turn of the agent loop: the user speaks, the model answers. Appending from
        # the record is optimistic: if another writer changed the session since it was
        # read, ConflictError is raised and none of these messages are stored.
        question = "Which museums are open on Monday?" if created else "And on Tuesday?"
        session = await ledger.messages.append(session, NewMessage(role="user", content=question))
        history = await ledger.messages.last(session.id, 20)
        answer, usage = fake_model(history)

        # The step trace: each model or tool call, with the token usage the provider reported.
        await ledger.steps.append(
            session.id, NewStep(kind="model", model="demo-model", usage=usage, output=answer)
        )
        session = await ledger.messages.append(
            session, NewMessage(role="assistant", content=answer)
        )

        # The user approved a capability once; a resumed run will not ask again.
        await ledger.grants.grant(session.id, "tool:museum-search", granted_by="ada")
        await ledger.sessions.finalize(
            session.id, RunSummary(status="completed", model="demo-model", usage=usage)
        )

        turns = session.state.get("turns", 0) + 1
        session = await ledger.sessions.save(
            session.model_copy(update={"state": {**session.state, "turns": turns}})
        )
        print(f"turn {turns} saved: {session.message_count} messages, revision {session.revision}")

        print(
            f"  {'session':<14} {'title':<28} {'status':<10} {'msgs':>4} {'steps':>5} {'tokens':>6}"
        )
        for item in (await ledger.sessions.list(user_id="ada", limit=10)).items:
            print(
                f"  {item.id:<14} {item.title or '':<28} {item.status:<10} "
                f"{item.message_count:>4} {item.step_count:>5} {item.total_tokens:>6}"
            )

    # A new process (or a restart) opens the same database and resumes.
    async with AsyncLedger(url) as ledger:
        resumed = await ledger.sessions.get("trip-planner")
        print(f"resumed {resumed.id} after {resumed.state['turns']} turn(s); last messages:")
        for message in await ledger.messages.last(resumed.id, 2):
            print(f"  #{message.seq} {message.role}: {message.content}")
        granted = await ledger.grants.is_granted(resumed.id, "tool:museum-search")
        spent = await ledger.steps.usage(session_id=resumed.id)
        print(f"museum search still granted: {granted}; tokens so far: {spent.total_tokens}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
