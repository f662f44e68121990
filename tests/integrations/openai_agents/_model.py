"""A scripted model for Runner-level tests: no network, each call's answer chosen from
what the model is given, and every input it saw kept for the test to read."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, function_tool
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

INPUT_TOKENS, CACHED_TOKENS, OUTPUT_TOKENS = 20, 5, 7


class ScriptedModel(Model):
    """Asked about the weather, it calls the ``weather`` tool once, then answers with the
    tool's output; otherwise it says how many items it was given and echoes the last."""

    def __init__(self) -> None:
        self.inputs: list[list[TResponseInputItem]] = []
        self.calls = 0

    def _output(self, items: list[TResponseInputItem]) -> list[Any]:
        self.calls += 1
        last = items[-1]
        if last.get("type") == "function_call_output":
            return [_message(self.calls, f"The weather: {last['output']}")]
        text = _text(last)
        if "weather" in text:
            city = text.rsplit(" ", 1)[-1].strip("?")
            call = ResponseFunctionToolCall(
                id=f"fc_{self.calls}",
                call_id=f"call_{self.calls}",
                type="function_call",
                name="weather",
                arguments=json.dumps({"city": city}),
            )
            return [call]
        return [_message(self.calls, f"{len(items)} items; you said: {text}")]

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kw: Any
    ) -> Any:
        items = _as_items(input)
        self.inputs.append(items)
        return ModelResponse(output=self._output(items), usage=usage(), response_id=None)

    async def stream_response(  # type: ignore[override]
        self, system_instructions: Any, input: Any, *args: Any, **kw: Any
    ) -> AsyncIterator[TResponseStreamEvent]:
        items = _as_items(input)
        self.inputs.append(items)
        response = Response(
            id=f"resp_{uuid.uuid4().hex}",
            created_at=0,
            model="scripted",
            object="response",
            output=self._output(items),
            parallel_tool_calls=False,
            tool_choice="auto",
            tools=[],
            usage={
                "input_tokens": INPUT_TOKENS,
                "input_tokens_details": {"cached_tokens": CACHED_TOKENS, "cache_write_tokens": 0},
                "output_tokens": OUTPUT_TOKENS,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
            },
        )
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=0
        )


@function_tool
def weather(city: str) -> str:
    """The weather in ``city``."""
    return f"sunny in {city}"


def agent(model: ScriptedModel) -> Agent[Any]:
    """The agent of these tests: the scripted model and the weather tool."""
    return Agent(name="helper", model=model, tools=[weather])


def usage() -> Usage:
    return Usage(
        requests=1,
        input_tokens=INPUT_TOKENS,
        input_tokens_details=InputTokensDetails(cached_tokens=CACHED_TOKENS, cache_write_tokens=0),
        output_tokens=OUTPUT_TOKENS,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
        total_tokens=INPUT_TOKENS + OUTPUT_TOKENS,
    )


def _as_items(input: str | list[TResponseInputItem]) -> list[TResponseInputItem]:
    return [{"role": "user", "content": input}] if isinstance(input, str) else list(input)


def _text(item: Any) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _message(n: int, text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg_{n}",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )
