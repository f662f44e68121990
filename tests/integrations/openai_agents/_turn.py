"""One turn of a conversation in a process of its own: ``python -m
tests.integrations.openai_agents._turn URL SESSION_ID TEXT`` prints the agent's answer."""

from __future__ import annotations

import asyncio
import sys

from agents import Runner

from agentledger.integrations.openai_agents import LedgerRunHooks, LedgerSession

from ._model import ScriptedModel, agent


async def turn(url: str, session_id: str, text: str) -> str:
    session = LedgerSession.from_url(session_id, url=url)
    try:
        result = await Runner.run(
            agent(ScriptedModel()), text, session=session, hooks=LedgerRunHooks(session)
        )
        return str(result.final_output)
    finally:
        await session.close()


if __name__ == "__main__":
    print(asyncio.run(turn(*sys.argv[1:4])))
