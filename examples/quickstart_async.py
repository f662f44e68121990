"""agentledger quickstart (async): a conversation that outlives the process.

Run it twice: the second run finds the conversation the first one left and continues.

    python examples/quickstart_async.py [DATABASE_URL]     (default sqlite:///agentledger.db)
"""

from __future__ import annotations

import asyncio
import sys

from agentledger import AsyncLedger, Message, NewMessage


def fake_model(history: list[Message]) -> str:
    """Stands in for a model call: answers the last user message."""
    question = history[-1].content
    return f"(answer {len(history) // 2 + 1}) You asked: {question!r}"


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
        answer = NewMessage(role="assistant", content=fake_model(history))
        session = await ledger.messages.append(session, answer)

        turns = session.state.get("turns", 0) + 1
        session = await ledger.sessions.save(
            session.model_copy(update={"state": {**session.state, "turns": turns}})
        )
        print(f"turn {turns} saved: {session.message_count} messages, revision {session.revision}")

        for item in (await ledger.sessions.list(user_id="ada", limit=10)).items:
            print(f"  {item.id:<14} {item.title or '':<28} {item.message_count:>3} messages")

    # A new process (or a restart) opens the same database and resumes.
    async with AsyncLedger(url) as ledger:
        resumed = await ledger.sessions.get("trip-planner")
        print(f"resumed {resumed.id} after {resumed.state['turns']} turn(s); last messages:")
        for message in await ledger.messages.last(resumed.id, 2):
            print(f"  #{message.seq} {message.role}: {message.content}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
