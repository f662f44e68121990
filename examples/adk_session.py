"""Google ADK on agentledger: a Runner whose sessions, events and state live in your
own database, under agentledger's migrations.

The agent books trains with a tool that writes state in every ADK scope: the
session's (``booked``), the user's (``user:home``), the app's (``app:bookings``) and
the invocation's (``temp:seat``, never stored). A scripted model stands in for Gemini
(no network, no key). Run it twice: the second run, a new process, finds the
conversation and the state and goes on from there.

    python examples/adk_session.py [DATABASE_URL]
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from agentledger import AsyncLedger
from agentledger.integrations import framework_of
from agentledger.integrations.adk import LedgerSessionService

APP, USER, SESSION = "trains", "ada", "lisbon-trip"


class ScriptedModel(BaseLlm):
    """Calls ``book_train`` for a user's message, then reports what the tool answered."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        part = (llm_request.contents[-1].parts or [types.Part()])[0]
        if part.function_response is not None:
            done = part.function_response.response or {}
            reply = types.Part(text=f"Booked {done['destination']}, seat {done['seat']}.")
        else:
            call = types.FunctionCall(name="book_train", args={"destination": "Lisbon"})
            reply = types.Part(function_call=call)
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=len(llm_request.contents), candidates_token_count=1
        )
        yield LlmResponse(content=types.Content(role="model", parts=[reply]), usage_metadata=usage)


def book_train(destination: str, tool_context: ToolContext) -> dict[str, Any]:
    """Book a train to ``destination``."""
    state = tool_context.state
    state["booked"] = destination
    state["user:home"] = "Porto"
    state["app:bookings"] = state.get("app:bookings", 0) + 1
    state["temp:seat"] = f"{10 + state['app:bookings']}A"
    return {"destination": destination, "seat": state["temp:seat"]}


async def main(url: str | None = None) -> None:
    async with AsyncLedger(url) as ledger:
        await ledger.upgrade()
        service = LedgerSessionService(ledger)  # borrows the ledger: never closes it
        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        if session is None:
            await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
            print(f"created session {SESSION}")
        else:
            print(f"found session {SESSION} with {len(session.events)} events")

        agent = LlmAgent(name="booker", model=ScriptedModel(model="scripted"), tools=[book_train])
        runner = Runner(agent=agent, app_name=APP, session_service=service)
        message = types.Content(role="user", parts=[types.Part(text="A train to Lisbon, please")])
        async for event in runner.run_async(user_id=USER, session_id=SESSION, new_message=message):
            if event.is_final_response() and event.content and event.content.parts:
                print(f"{event.author}: {event.content.parts[0].text}")

        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert session is not None
        print("state:", dict(sorted(session.state.items())))
        record = await ledger.sessions.get_by_key(SESSION, app_name=APP, user_id=USER)
        print(
            f"in the ledger: made by {framework_of(record.id)!r}, "
            f"{record.message_count} messages, revision {record.revision}"
        )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
