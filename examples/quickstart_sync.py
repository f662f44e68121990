"""agentledger quickstart (sync): the same as quickstart_async.py, without await.

python examples/quickstart_sync.py [DATABASE_URL]     (default sqlite:///agentledger.db)
"""

from __future__ import annotations

import sys

from agentledger import Ledger, Message, NewMessage, NewStep, RunSummary, TokenUsage


def fake_model(history: list[Message]) -> tuple[str, TokenUsage]:
    """Stands in for a model call: answers the last user message, reports token usage."""
    question = history[-1].content
    usage = TokenUsage(
        input_tokens=12 * len(history), output_tokens=20, total_tokens=12 * len(history) + 20
    )
    return f"(answer {len(history) // 2 + 1}) You asked: {question!r}", usage


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
        answer, usage = fake_model(ledger.messages.last(session.id, 20))
        ledger.steps.append(
            session.id, NewStep(kind="model", model="demo-model", usage=usage, output=answer)
        )
        session = ledger.messages.append(session, NewMessage(role="assistant", content=answer))
        ledger.grants.grant(session.id, "tool:museum-search", granted_by="ada")
        ledger.sessions.finalize(
            session.id, RunSummary(status="completed", model="demo-model", usage=usage)
        )

        turns = session.state.get("turns", 0) + 1
        session = ledger.sessions.save(
            session.model_copy(update={"state": {**session.state, "turns": turns}})
        )
        print(f"turn {turns} saved: {session.message_count} messages, revision {session.revision}")

        for item in ledger.sessions.list(user_id="ada", limit=10).items:
            print(
                f"  {item.id:<14} {item.title or '':<28} {item.status:<10} "
                f"{item.message_count:>4} {item.step_count:>5} {item.total_tokens:>6}"
            )

    with Ledger(url) as ledger:
        resumed = ledger.sessions.get("trip-planner")
        print(f"resumed {resumed.id} after {resumed.state['turns']} turn(s); last messages:")
        for message in ledger.messages.last(resumed.id, 2):
            print(f"  #{message.seq} {message.role}: {message.content}")
        granted = ledger.grants.is_granted(resumed.id, "tool:museum-search")
        spent = ledger.steps.usage(session_id=resumed.id)
        print(f"museum search still granted: {granted}; tokens so far: {spent.total_tokens}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
