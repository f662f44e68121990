"""agentledger quickstart (sync): the same as quickstart_async.py, without await.

python examples/quickstart_sync.py [DATABASE_URL]     (default sqlite:///agentledger.db)
"""

from __future__ import annotations

import sys

from agentledger import Ledger, Message, NewMessage


def fake_model(history: list[Message]) -> str:
    """Stands in for a model call: answers the last user message."""
    question = history[-1].content
    return f"(answer {len(history) // 2 + 1}) You asked: {question!r}"


def main(url: str | None = None) -> None:
    with Ledger(url) as ledger:
        ledger.upgrade()

        session, created = ledger.sessions.get_or_create(
            "trip-planner", user_id="ada", title="Planning a trip to Lisbon"
        )
        print("created" if created else "found", f"session {session.id}", end=" ")
        print(f"with {session.message_count} messages at revision {session.revision}")

        question = "Which museums are open on Monday?" if created else "And on Tuesday?"
        session = ledger.messages.append(session, NewMessage(role="user", content=question))
        history = ledger.messages.last(session.id, 20)
        session = ledger.messages.append(
            session, NewMessage(role="assistant", content=fake_model(history))
        )

        turns = session.state.get("turns", 0) + 1
        session = ledger.sessions.save(
            session.model_copy(update={"state": {**session.state, "turns": turns}})
        )
        print(f"turn {turns} saved: {session.message_count} messages, revision {session.revision}")

        for item in ledger.sessions.list(user_id="ada", limit=10).items:
            print(f"  {item.id:<14} {item.title or '':<28} {item.message_count:>3} messages")

    with Ledger(url) as ledger:
        resumed = ledger.sessions.get("trip-planner")
        print(f"resumed {resumed.id} after {resumed.state['turns']} turn(s); last messages:")
        for message in ledger.messages.last(resumed.id, 2):
            print(f"  #{message.seq} {message.role}: {message.content}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
