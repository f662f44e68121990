"""agentledger quickstart (async): a session that outlives the process.

Run it twice: the second run finds the session the first one left and continues.

    python examples/quickstart_async.py [DATABASE_URL]     (default sqlite:///agentledger.db)
"""

from __future__ import annotations

import asyncio
import sys

from agentledger import AsyncLedger


async def main(url: str | None = None) -> None:
    async with AsyncLedger(url) as ledger:
        await ledger.upgrade()  # creates or updates the tables (Alembic migrations)

        session, created = await ledger.sessions.get_or_create(
            "trip-planner", user_id="ada", title="Planning a trip to Lisbon"
        )
        print(
            "created" if created else "found",
            f"session {session.id} at revision {session.revision}",
        )

        # Read, modify, save: the save fails with ConflictError if another writer got
        # there first, so no update is ever silently lost.
        runs = session.state.get("runs", 0) + 1
        state = {**session.state, "runs": runs, "destination": "Lisbon"}
        session = await ledger.sessions.save(session.model_copy(update={"state": state}))
        print(f"saved state {session.state} -> revision {session.revision}")

        page = await ledger.sessions.list(user_id="ada", limit=10)
        for item in page.items:
            print(
                f"  {item.id:<14} {item.title or '':<30} {item.status:<8} {item.updated_at:%H:%M:%S}"
            )

    # A new process (or a restart) opens the same database and resumes.
    async with AsyncLedger(url) as ledger:
        resumed = await ledger.sessions.get("trip-planner")
        print(
            f"resumed {resumed.id}: run #{resumed.state['runs']}, going to {resumed.state['destination']}"
        )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
