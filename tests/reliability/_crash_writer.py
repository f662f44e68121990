"""A writer process for the crash tests: units of work until it is killed.

Usage: python -m tests.reliability._crash_writer URL [JOURNAL_MODE]

Each unit of work creates a session whose state declares how many messages and steps
it holds, appends them, and commits; then the writer prints the session id (an
acknowledged commit). With JOURNAL_MODE (SQLite only) the writer borrows an engine in
that journal mode instead of agentledger's WAL set-up.
"""

from __future__ import annotations

import random
import sys
from typing import Any

from sqlalchemy import create_engine, event

from agentledger import Ledger, NewMessage, NewStep, TokenUsage


def _engine(url: str, journal_mode: str) -> Any:
    engine = create_engine(url)

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA journal_mode = {journal_mode}")
        cursor.execute("PRAGMA synchronous = FULL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    return engine


def main(url: str, journal_mode: str | None) -> None:
    ledger = Ledger(engine=_engine(url, journal_mode)) if journal_mode else Ledger(url)
    ledger.sessions.exists("warm-up")
    print("ready", flush=True)
    serial = 0
    while True:
        serial += 1
        size = random.randint(5, 60)
        session_id = f"crash-{random.getrandbits(48):012x}-{serial}"
        with ledger.unit_of_work() as uow:
            record = uow.sessions.create(session_id, state={"declared": size, "blob": "x" * 2000})
            record = uow.messages.append(
                record, [NewMessage(role="user", content=f"m{i} " * 50) for i in range(size)]
            ).session
            uow.steps.append(
                session_id,
                [NewStep(step_index=i, usage=TokenUsage(total_tokens=1)) for i in range(size)],
            )
            uow.sessions.save(record.model_copy(update={"state": {"declared": size, "done": True}}))
        print(session_id, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
