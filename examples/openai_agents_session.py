"""An OpenAI Agents SDK agent whose memory is agentledger, in your own database.

``LedgerSession`` is the SDK's ``Session``: the conversation survives the process, and
``LedgerRunHooks`` records each model and tool call with its token usage. The model
here is a stand-in that needs no API key (swap in ``model="gpt-4.1"``); it calls the
``weather`` tool when asked about the weather. Run it twice: the second run finds the
conversation of the first.

    python examples/openai_agents_session.py [DATABASE_URL]
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from agents import Agent, Runner, function_tool
from agents.items import ModelResponse
from agents.models.fake_id import FAKE_RESPONSES_ID
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from agentledger.integrations.openai_agents import LedgerRunHooks, LedgerSession

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")  # nothing to send traces to


@function_tool
def weather(city: str) -> str:
    """Today's weather in ``city``."""
    return f"sunny, 24°C in {city}"


class StandInModel(Model):
    """Calls ``weather`` for a question about it, then answers with what it returned;
    otherwise says how much of the conversation it was given."""

    async def get_response(self, system_instructions: Any, input: Any, *_: Any, **__: Any) -> Any:
        last = input[-1] if isinstance(input, list) else {"content": input}
        if last.get("type") == "function_call_output":
            output: Any = _say(f"Good news: {last['output']}.")
        elif "weather" in str(last.get("content")):
            city = str(last["content"]).rsplit(" ", 1)[-1].strip("?")
            output = ResponseFunctionToolCall(
                type="function_call",
                call_id=f"call-{len(input)}",
                name="weather",
                arguments=json.dumps({"city": city}),
            )
        else:
            output = _say(f"I have {len(input)} items of our conversation in mind.")
        usage = Usage(requests=1, input_tokens=12 * len(input), output_tokens=9)
        usage.total_tokens = usage.input_tokens + usage.output_tokens
        return ModelResponse(output=[output], usage=usage, response_id=None)

    def stream_response(self, *_: Any, **__: Any) -> Any:
        raise NotImplementedError("this stand-in does not stream")


def _say(text: str) -> ResponseOutputMessage:
    part = ResponseOutputText(type="output_text", text=text, annotations=[])
    return ResponseOutputMessage(
        id=FAKE_RESPONSES_ID, type="message", role="assistant", status="completed", content=[part]
    )


async def main(url: str | None) -> None:
    agent = Agent(name="trip helper", model=StandInModel(), tools=[weather])
    # The two lines: a session in your database, and a run that remembers.
    session = LedgerSession.from_url("ada-lisbon-trip", url=url or "sqlite:///agentledger.db")
    await session.ledger.upgrade()  # agentledger's migrations (or: agentledger db upgrade)
    before = len(await session.get_items())
    print(f"session ada-lisbon-trip holds {before} items")
    hooks = LedgerRunHooks(session)
    for question in ("What is the weather in Lisbon?", "Thanks!"):
        result = await Runner.run(agent, question, session=session, hooks=hooks)
        print(f"> {question}\n< {result.final_output}")
    record = await session.record()
    usage = await session.ledger.steps.usage(session_id=record.id)
    steps = await session.ledger.steps.count(record.id)
    print(f"now {len(await session.get_items())} items; {steps} steps, {usage.total_tokens} tokens")
    print(f"agentledger session {record.id}, key {record.external_key}")
    print(f"see it: agentledger sessions show {record.external_key} (or {record.id})")
    await session.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
