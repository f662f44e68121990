"""Writers for the concurrency tests: ``python -m tests.integrations.openai_agents._writers URL
SESSION_ID PROCESS WRITERS BATCHES`` waits until the file named by the environment's
``START_FILE`` exists, then runs WRITERS concurrent writers, each with a LedgerSession
of its own, each adding BATCHES batches of two items to the SDK session SESSION_ID.
Prints how many batches were stored."""

from __future__ import annotations

import asyncio
import os
import sys
import time

from agentledger import AsyncLedger
from agentledger.integrations.openai_agents import LedgerSession


def batch(writer: str, n: int) -> list[dict[str, object]]:
    """Writer ``writer``'s batch ``n``: a question and its answer."""
    return [
        {"role": "user", "content": f"{writer} asks {n}"},
        {"role": "assistant", "content": f"{writer} answers {n}"},
    ]


async def write(ledger: AsyncLedger, session_id: str, writer: str, batches: int) -> int:
    """Add ``batches`` batches as ``writer``, on a LedgerSession of its own."""
    session = LedgerSession(session_id, ledger)
    for n in range(batches):
        await session.add_items(batch(writer, n))
    return batches


async def main(url: str, session_id: str, process: str, writers: int, batches: int) -> int:
    start = os.environ.get("START_FILE")
    while start is not None and not os.path.exists(start):
        time.sleep(0.01)
    async with AsyncLedger(url) as ledger:
        done = await asyncio.gather(
            *(write(ledger, session_id, f"{process}.{w}", batches) for w in range(writers))
        )
    return sum(done)


if __name__ == "__main__":
    url, session_id, process, writers, batches = sys.argv[1:6]
    print(asyncio.run(main(url, session_id, process, int(writers), int(batches))))
