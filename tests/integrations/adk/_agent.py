"""A scripted ADK agent for the Runner-level tests: a fake model (no network), one
tool that changes state in every scope, and a turn runnable in a process of its own:
``python -m tests.integrations.adk._agent URL TEXT`` runs one turn on the ledger at
URL and prints, as JSON, what the model saw and the session's state afterwards.
"""

from __future__ import annotations

import asyncio
import json
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
from pydantic import Field

from agentledger.integrations.adk import LedgerSessionService

APP, USER, SESSION = "trains", "ada", "trip-1"


class ScriptedModel(BaseLlm):
    """Asks for ``book_train`` when the user says "book", answers once the tool has
    answered, and otherwise says how many contents it was sent; records every request."""

    seen: list[list[str]] = Field(default_factory=list)
    """Each request's contents, described in a line each."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        texts = [_describe(content) for content in llm_request.contents]
        self.seen.append(texts)
        last = llm_request.contents[-1].parts or []
        if any(part.function_response for part in last):
            reply = types.Part(text="Booked: " + json.dumps(last[0].function_response.response))
        elif any(part.text and "book" in part.text for part in last):
            call = types.FunctionCall(name="book_train", args={"destination": "Porto"})
            reply = types.Part(function_call=call)
        else:
            reply = types.Part(text=f"I was sent {len(texts)} contents")
        yield LlmResponse(content=types.Content(role="model", parts=[reply]))


def _describe(content: types.Content) -> str:
    part = (content.parts or [types.Part()])[0]
    if part.function_call:
        return f"{content.role}: call {part.function_call.name}"
    if part.function_response:
        return f"{content.role}: result of {part.function_response.name}"
    return f"{content.role}: {part.text}"


def book_train(destination: str, tool_context: ToolContext) -> dict[str, Any]:
    """Book a train to ``destination``; notes it in the session's, the user's, the app's
    and the invocation's (temp) state."""
    tool_context.state["booked"] = destination
    tool_context.state["user:home"] = destination
    tool_context.state["app:bookings"] = tool_context.state.get("app:bookings", 0) + 1
    tool_context.state["temp:seat"] = "12A"
    return {"destination": destination, "seat": tool_context.state["temp:seat"]}


def runner(service: LedgerSessionService, model: ScriptedModel) -> Runner:
    """A Runner of the scripted agent, thinking with ``model``, on ``service``."""
    agent = LlmAgent(
        name="planner",
        model=model,
        instruction="Book trains.",
        tools=[book_train],
        output_key="last_answer",
    )
    return Runner(agent=agent, app_name=APP, session_service=service)


async def turn(service: LedgerSessionService, model: ScriptedModel, text: str) -> list[str]:
    """Run one user turn on the session; the texts of the final responses."""
    message = types.Content(role="user", parts=[types.Part(text=text)])
    answers = []
    async for event in runner(service, model).run_async(
        user_id=USER, session_id=SESSION, new_message=message
    ):
        if event.is_final_response() and event.content and event.content.parts:
            answers.append(event.content.parts[0].text or "")
    return answers


async def _main(url: str, text: str) -> None:
    async with LedgerSessionService(url) as service:
        model = ScriptedModel(model="scripted")
        answers = await turn(service, model, text)
        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert session is not None
        print(json.dumps({"answers": answers, "seen": model.seen, "state": session.state}))


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1], sys.argv[2]))
