"""LedgerSession under the SDK's Runner (run, run_sync, run_streamed), with a scripted
model (tests/integrations/openai_agents/_model.py): no network, no API key."""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from agents import Runner
from agents.extensions.memory.encrypt_session import EncryptedSession
from agents.memory import OpenAIResponsesCompactionSession

from agentledger import AsyncLedger, ConflictError, ValidationError
from agentledger.integrations.openai_agents import LedgerRunHooks, LedgerSession

from ._model import CACHED_TOKENS, INPUT_TOKENS, OUTPUT_TOKENS, ScriptedModel, agent
from .conftest import Store

ROOT = Path(__file__).resolve().parents[3]
CALL = INPUT_TOKENS + OUTPUT_TOKENS


def kinds(items: list[Any]) -> list[str]:
    return [item.get("type") or item["role"] for item in items]


async def test_a_second_run_sees_the_first_runs_items(store: Store) -> None:
    model, session = ScriptedModel(), LedgerSession("chat", store.ledger)
    await Runner.run(agent(model), "hello", session=session)
    second = await Runner.run(agent(model), "again", session=session)
    assert second.final_output == "3 items; you said: again"
    assert kinds(model.inputs[1]) == ["user", "message", "user"]
    assert len(await session.get_items()) == 4


async def test_a_tool_call_is_stored_as_items_and_recorded_as_steps(store: Store) -> None:
    session = LedgerSession("chat", store.ledger)
    result = await Runner.run(
        agent(ScriptedModel()), "weather in Lisbon", session=session, hooks=LedgerRunHooks(session)
    )
    assert result.final_output == "The weather: sunny in Lisbon"
    items = await session.get_items()
    assert kinds(items) == ["user", "function_call", "function_call_output", "message"]
    record = await session.record()
    model, tool, answer = await store.ledger.steps.last(record.id, 10)
    assert [model.kind, tool.kind, answer.kind] == ["model", "tool", "model"]
    assert model.run_id == tool.run_id == answer.run_id is not None
    assert (tool.name, tool.input, tool.output) == (
        "weather",
        '{"city": "Lisbon"}',
        "sunny in Lisbon",
    )
    assert tool.external_key == items[1]["call_id"]
    assert model.usage.extra["cached_tokens"] == CACHED_TOKENS
    assert model.output == [items[1]]


async def test_the_run_usage_is_the_sessions_and_its_end_is_the_last_run(store: Store) -> None:
    session = LedgerSession("chat", store.ledger)
    hooks = LedgerRunHooks(session)
    await Runner.run(agent(ScriptedModel()), "weather in Porto", session=session, hooks=hooks)
    record = await session.record()
    assert record.last_run is not None and record.last_run.status == "completed"
    assert record.last_run.usage.total_tokens == 2 * CALL
    assert record.last_run.usage.extra["cached_tokens"] == 2 * CACHED_TOKENS
    await Runner.run(agent(ScriptedModel()), "thanks", session=session, hooks=hooks)
    usage = await store.ledger.steps.usage(session_id=record.id)
    assert (usage.input_tokens, usage.output_tokens) == (3 * INPUT_TOKENS, 3 * OUTPUT_TOKENS)
    assert (await session.record()).total_tokens == 3 * CALL
    runs = {step.run_id for step in await store.ledger.steps.last(record.id, 10)}
    assert len(runs) == 2


async def test_a_streamed_run_stores_its_items(store: Store) -> None:
    session = LedgerSession("chat", store.ledger)
    await Runner.run(agent(ScriptedModel()), "hello", session=session)
    streamed = Runner.run_streamed(
        agent(ScriptedModel()), "streamed", session=session, hooks=LedgerRunHooks(session)
    )
    async for _ in streamed.stream_events():
        pass
    assert streamed.final_output == "3 items; you said: streamed"
    assert kinds(await session.get_items()) == ["user", "message", "user", "message"]
    record = await session.record()
    (step,) = await store.ledger.steps.last(record.id, 10)
    assert step.usage.total_tokens == CALL and step.external_key is not None


def test_run_sync_after_an_asyncio_run_works_on_the_same_session(shared_store: Store) -> None:
    assert shared_store.url is not None
    session = LedgerSession.from_url("chat", url=shared_store.url)
    asyncio.run(Runner.run(agent(ScriptedModel()), "first", session=session))
    result = Runner.run_sync(agent(ScriptedModel()), "second", session=session)
    assert result.final_output == "3 items; you said: second"
    asyncio.run(session.close())
    gc.collect()  # nothing left to complain when collected: each loop closed its own


def test_a_new_session_object_on_a_shared_ledger_works_on_a_new_loop(
    shared_store: Store,
) -> None:
    assert shared_store.url is not None
    ledger = AsyncLedger(shared_store.url)
    asyncio.run(Runner.run(agent(ScriptedModel()), "first", session=LedgerSession("c", ledger)))
    second = Runner.run_sync(agent(ScriptedModel()), "second", session=LedgerSession("c", ledger))
    assert second.final_output == "3 items; you said: second"

    async def read_and_close() -> int:
        count = len(await LedgerSession("c", ledger).get_items())
        await ledger.close()
        return count

    assert asyncio.run(read_and_close()) == 4
    gc.collect()  # nothing left to complain when collected: each loop closed its own


@pytest.mark.slow
@pytest.mark.databases("sqlite")
async def test_a_conversation_resumes_in_a_new_process(shared_store: Store) -> None:
    """On a SQLite file; the example's test resumes in a new process on every database."""
    assert shared_store.url is not None
    session = LedgerSession("chat", shared_store.ledger)
    first = await Runner.run(agent(ScriptedModel()), "weather in Faro", session=session)
    assert first.final_output == "The weather: sunny in Faro"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.integrations.openai_agents._turn",
            shared_store.url,
            "chat",
            "and then",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "OPENAI_AGENTS_DISABLE_TRACING": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "5 items; you said: and then"
    assert len(await session.get_items()) == 6


async def test_the_sdks_encrypted_session_works_on_top(store: Store) -> None:
    underneath = LedgerSession("chat", store.ledger)
    encrypted = EncryptedSession("chat", underneath, encryption_key="k" * 32)
    await Runner.run(agent(ScriptedModel()), "secret plan", session=encrypted)
    second = await Runner.run(agent(ScriptedModel()), "go on", session=encrypted)
    assert second.final_output == "3 items; you said: go on"
    stored = await underneath.get_items()
    assert "secret plan" not in repr(stored) and len(stored) == 4


class _Compactor:
    """A stand-in for the OpenAI client's ``responses.compact``."""

    def __init__(self) -> None:
        self.responses = self
        self.seen: list[Any] = []

    async def compact(self, **arguments: Any) -> Any:
        self.seen.append(arguments["input"])
        summary = {"type": "message", "role": "user", "content": "summary of the chat"}
        return SimpleNamespace(output=[summary], usage=None)


async def test_the_sdks_compaction_session_works_on_top(store: Store) -> None:
    underneath, client = LedgerSession("chat", store.ledger), _Compactor()
    compacting = OpenAIResponsesCompactionSession(
        "chat",
        underneath,
        client=client,
        compaction_mode="input",  # type: ignore[arg-type]
    )
    await Runner.run(agent(ScriptedModel()), "hello", session=compacting)
    await compacting.run_compaction({"force": True})
    assert len(client.seen[0]) == 2
    assert [item["content"] for item in await underneath.get_items()] == ["summary of the chat"]
    later = await Runner.run(agent(ScriptedModel()), "next", session=compacting)
    assert later.final_output == "2 items; you said: next"


async def test_the_hooks_take_a_ledger_session_only() -> None:
    with pytest.raises(ValidationError, match="LedgerSession"):
        LedgerRunHooks(object())  # type: ignore[arg-type]


class _Interrupted(ScriptedModel):
    """A model during whose call another writer adds an item to the session."""

    def __init__(self, other: LedgerSession) -> None:
        super().__init__()
        self.other = other

    async def get_response(self, *args: Any, **kw: Any) -> Any:
        await self.other.add_items([{"role": "user", "content": "from another tab"}])
        return await super().get_response(*args, **kw)


async def test_a_run_on_history_changed_meanwhile_is_refused_when_asked(store: Store) -> None:
    other = LedgerSession("chat", store.ledger)
    await other.add_items([{"role": "user", "content": "hello"}])
    session = LedgerSession("chat", store.ledger, unseen_items="refuse")
    with pytest.raises(ConflictError) as caught:
        await Runner.run(agent(_Interrupted(other)), "question", session=session)
    assert caught.value.reason == "stale"
    contents = [item["content"] for item in await other.get_items()]
    assert contents == ["hello", "question", "from another tab"]
