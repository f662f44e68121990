"""A writer process for the multi-process test: read, modify, save, retry on conflict.

Usage: python -m tests.contract._writer URL SESSION_ID WRITER_INDEX ROUNDS
Prints the number of conflicts it met.
"""

from __future__ import annotations

import sys

from agentledger import ConflictError, Ledger


def main(url: str, session_id: str, index: int, rounds: int) -> int:
    conflicts = 0
    with Ledger(url) as ledger:
        for _ in range(rounds):
            while True:
                record = ledger.sessions.get(session_id)
                state = dict(record.state)
                state["total"] += 1
                state[f"w{index}"] = state.get(f"w{index}", 0) + 1
                try:
                    ledger.sessions.save(record.model_copy(update={"state": state}))
                    break
                except ConflictError:
                    conflicts += 1
    return conflicts


if __name__ == "__main__":
    url, session_id, index, rounds = sys.argv[1:5]
    print(main(url, session_id, int(index), int(rounds)))
