"""agentledger quickstart (sync): the same as quickstart_async.py, without await.

python examples/quickstart_sync.py [DATABASE_URL]     (default sqlite:///agentledger.db)
"""

from __future__ import annotations

import sys

from agentledger import Ledger


def main(url: str | None = None) -> None:
    with Ledger(url) as ledger:
        ledger.upgrade()

        session, created = ledger.sessions.get_or_create(
            "trip-planner", user_id="ada", title="Planning a trip to Lisbon"
        )
        print(
            "created" if created else "found",
            f"session {session.id} at revision {session.revision}",
        )

        runs = session.state.get("runs", 0) + 1
        state = {**session.state, "runs": runs, "destination": "Lisbon"}
        session = ledger.sessions.save(session.model_copy(update={"state": state}))
        print(f"saved state {session.state} -> revision {session.revision}")

        for item in ledger.sessions.list(user_id="ada", limit=10).items:
            print(
                f"  {item.id:<14} {item.title or '':<30} {item.status:<8} {item.updated_at:%H:%M:%S}"
            )

    with Ledger(url) as ledger:
        resumed = ledger.sessions.get("trip-planner")
        print(
            f"resumed {resumed.id}: run #{resumed.state['runs']}, going to {resumed.state['destination']}"
        )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
