"""Two writers, one conversation: the second is told, nothing is lost.

Two harness replicas read the same session, then both append a reply. The first
wins; the second gets ConflictError (reason "stale") and none of its messages are
stored. `ledger.run` shows the usual cure: re-read inside a fresh unit of work and
apply the change again.

    python examples/two_writers_conflict.py [DATABASE_URL]
"""

from __future__ import annotations

import asyncio
import sys

from agentledger import AsyncLedger, AsyncUnitOfWork, ConflictError, NewMessage


async def main(url: str | None = None) -> None:
    async with AsyncLedger(url) as ledger:
        await ledger.upgrade()
        if await ledger.sessions.exists("shared-chat"):
            await ledger.sessions.delete("shared-chat")
        await ledger.sessions.create("shared-chat", title="Two replicas")

        seen_by_a = await ledger.sessions.get("shared-chat")
        seen_by_b = await ledger.sessions.get("shared-chat")

        await ledger.messages.append(seen_by_a, NewMessage(role="assistant", content="from A"))
        print("writer A appended at revision", seen_by_a.revision)
        try:
            await ledger.messages.append(seen_by_b, NewMessage(role="assistant", content="from B"))
        except ConflictError as conflict:
            print(f"writer B got ConflictError (reason={conflict.reason}); nothing of B stored")

        async def append_again(uow: AsyncUnitOfWork) -> int:
            fresh = await uow.sessions.get("shared-chat")
            done = await uow.messages.append(fresh, NewMessage(role="assistant", content="from B"))
            return done.session.revision

        revision = await ledger.run(append_again)
        print("writer B retried from a fresh read: revision", revision)
        for message in await ledger.messages.all("shared-chat"):
            print(f"  #{message.seq} {message.content}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
