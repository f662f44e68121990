"""Real StateGraph runs on every backend, sync and async, each compared with the states
LangGraph's own InMemorySaver gives for the same run."""

from __future__ import annotations

import itertools
import operator
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, StateSnapshot, interrupt

from agentledger import AsyncLedger, Ledger

from .conftest import Saved, close, make_ledger, make_saver


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def _step(name: str) -> Any:
    """A node adding ``name`` to the log (of any graph's state: the input is not
    annotated, so LangGraph gives it the graph's own schema)."""

    def node(state: Any) -> dict[str, list[str]]:
        return {"log": [name]}

    return node


def parallel_graph() -> StateGraph[State]:
    """start -> (left, right in one step) -> join."""
    builder = StateGraph(State)
    for name in ("start", "left", "right", "join"):
        builder.add_node(name, _step(name))
    builder.add_edge(START, "start")
    builder.add_edge("start", "left")
    builder.add_edge("start", "right")
    builder.add_edge(["left", "right"], "join")
    builder.add_edge("join", END)
    return builder


def approval_graph() -> StateGraph[State]:
    """draft -> approve (interrupts for a human's answer) -> send."""

    def approve(state: State) -> dict[str, list[str]]:
        answer = interrupt({"question": "send it?", "draft": state["log"][-1]})
        return {"log": [f"approved:{answer}"]}

    return draft_then_send("approve", approve)


def draft_then_send(name: str, node: Any) -> StateGraph[State]:
    """draft -> ``name`` (``node``) -> send."""
    builder = StateGraph(State)
    builder.add_node("draft", _step("draft"))
    builder.add_node(name, node)
    builder.add_node("send", _step("send"))
    builder.add_edge(START, "draft")
    builder.add_edge("draft", name)
    builder.add_edge(name, "send")
    builder.add_edge("send", END)
    return builder


def subgraph_graph() -> StateGraph[State]:
    """outer -> inner (a compiled subgraph of two nodes) -> after."""
    inner = StateGraph(State)
    inner.add_node("inner_a", _step("inner_a"))
    inner.add_node("inner_b", _step("inner_b"))
    inner.add_edge(START, "inner_a")
    inner.add_edge("inner_a", "inner_b")
    return around(inner)


def around(inner: StateGraph[State]) -> StateGraph[State]:
    """outer -> inner (``inner`` compiled, a subgraph) -> after."""
    builder = StateGraph(State)
    builder.add_node("outer", _step("outer"))
    builder.add_node("inner", inner.compile())
    builder.add_node("after", _step("after"))
    builder.add_edge(START, "outer")
    builder.add_edge("outer", "inner")
    builder.add_edge("inner", "after")
    return builder


class Runner:
    """One graph on one saver, driven through the sync or the async API of LangGraph."""

    def __init__(self, builder: StateGraph[State], saver: BaseCheckpointSaver[Any], mode: str):
        self.graph = builder.compile(checkpointer=saver)
        self.mode = mode

    async def invoke(self, value: Any, config: dict[str, Any]) -> Any:
        if self.mode == "async":
            return await self.graph.ainvoke(value, config)
        return self.graph.invoke(value, config)

    async def state(self, config: dict[str, Any], *, subgraphs: bool = False) -> StateSnapshot:
        if self.mode == "async":
            return await self.graph.aget_state(config, subgraphs=subgraphs)
        return self.graph.get_state(config, subgraphs=subgraphs)

    async def history(self, config: dict[str, Any]) -> list[StateSnapshot]:
        if self.mode == "async":
            return [state async for state in self.graph.aget_state_history(config)]
        return list(self.graph.get_state_history(config))

    async def update(self, config: dict[str, Any], values: dict[str, Any]) -> Any:
        if self.mode == "async":
            return await self.graph.aupdate_state(config, values)
        return self.graph.update_state(config, values)


def _thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def _shape(state: StateSnapshot) -> tuple[Any, ...]:
    """What a state holds, without its run-specific ids."""
    return (
        state.values,
        state.next,
        state.metadata.get("step") if state.metadata else None,
        state.metadata.get("source") if state.metadata else None,
        [task.name for task in state.tasks],
        [interrupt.value for interrupt in state.interrupts],
    )


async def _history_shapes(runner: Runner, thread: str) -> list[tuple[Any, ...]]:
    return [_shape(state) for state in await runner.history(_thread(thread))]


async def test_parallel_branches_give_the_states_of_the_in_memory_saver(saved: Saved) -> None:
    ours = Runner(parallel_graph(), saved.saver, saved.mode)
    reference = Runner(parallel_graph(), InMemorySaver(), saved.mode)

    result = await ours.invoke({"log": []}, _thread("t"))
    expected = await reference.invoke({"log": []}, _thread("t"))

    assert result == expected
    assert sorted(result["log"][1:3]) == ["left", "right"]
    assert await _history_shapes(ours, "t") == await _history_shapes(reference, "t")


async def test_get_state_history_lists_every_step_newest_first(saved: Saved) -> None:
    ours = Runner(parallel_graph(), saved.saver, saved.mode)
    await ours.invoke({"log": []}, _thread("t"))

    history = await ours.history(_thread("t"))

    assert [state.metadata["step"] for state in history if state.metadata] == [3, 2, 1, 0, -1]
    assert history[0].values["log"][-1] == "join"
    for newer, older in itertools.pairwise(history):
        assert newer.parent_config is not None
        assert (
            newer.parent_config["configurable"]["checkpoint_id"]
            == (older.config["configurable"]["checkpoint_id"])
        )


@asynccontextmanager
async def _second_saver(saved: Saved) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """Another saver on the same database: a new ledger (a new connection pool), or for
    an in-memory store another saver on its ledger."""
    if saved.url is None:
        yield make_saver(saved.mode, saved.ledger)
        return
    ledger = make_ledger(saved.mode, saved.url)
    try:
        yield make_saver(saved.mode, ledger)
    finally:
        await close(ledger)


async def test_an_interrupt_is_resumed_with_command_from_a_new_saver(saved: Saved) -> None:
    first = Runner(approval_graph(), saved.saver, saved.mode)
    paused = await first.invoke({"log": []}, _thread("t"))
    assert paused["__interrupt__"][0].value == {"question": "send it?", "draft": "draft"}

    async with _second_saver(saved) as saver:
        second = Runner(approval_graph(), saver, saved.mode)
        assert (await second.state(_thread("t"))).next == ("approve",)
        done = await second.invoke(Command(resume="yes"), _thread("t"))

    reference = Runner(approval_graph(), InMemorySaver(), saved.mode)
    await reference.invoke({"log": []}, _thread("t"))
    expected = await reference.invoke(Command(resume="yes"), _thread("t"))
    assert done == expected == {"log": ["draft", "approved:yes", "send"]}
    assert await _history_shapes(first, "t") == await _history_shapes(reference, "t")


async def test_a_subgraph_keeps_its_own_namespace_and_the_in_memory_states(saved: Saved) -> None:
    ours = Runner(subgraph_graph(), saved.saver, saved.mode)
    reference = Runner(subgraph_graph(), InMemorySaver(), saved.mode)

    result = await ours.invoke({"log": []}, _thread("t"))
    expected = await reference.invoke({"log": []}, _thread("t"))

    # The subgraph hands back its whole state, which the parent's reducer adds again.
    assert result == expected == {"log": ["outer", "outer", "inner_a", "inner_b", "after"]}
    assert await _history_shapes(ours, "t") == await _history_shapes(reference, "t")
    namespaces = {
        item.config["configurable"]["checkpoint_ns"]
        async for item in _list(saved.saver, _thread("t"))
    }
    assert "" in namespaces and any(ns.startswith("inner:") for ns in namespaces)


async def _list(saver: BaseCheckpointSaver[Any], config: dict[str, Any]) -> AsyncIterator[Any]:
    async for item in saver.alist(config):
        yield item


async def test_a_fork_with_update_state_branches_from_an_old_checkpoint(saved: Saved) -> None:
    results = []
    for saver in (saved.saver, InMemorySaver()):
        runner = Runner(parallel_graph(), saver, saved.mode)
        await runner.invoke({"log": []}, _thread("t"))
        after_start = next(
            state for state in await runner.history(_thread("t")) if state.next == ("left", "right")
        )
        forked = await runner.update(after_start.config, {"log": ["edited"]})
        assert (
            forked["configurable"]["checkpoint_id"]
            != after_start.config["configurable"]["checkpoint_id"]
        )
        final = await runner.invoke(None, forked)
        fork_state = await runner.state(forked)
        assert fork_state.parent_config is not None
        assert (
            fork_state.parent_config["configurable"]["checkpoint_id"]
            == after_start.config["configurable"]["checkpoint_id"]
        )
        results.append((final, await _history_shapes(runner, "t")))

    assert results[0] == results[1]
    assert results[0][0]["log"][:2] == ["start", "edited"]


async def test_delete_thread_removes_the_thread_and_its_session(saved: Saved) -> None:
    ours = Runner(subgraph_graph(), saved.saver, saved.mode)
    await ours.invoke({"log": []}, _thread("gone"))
    await ours.invoke({"log": []}, _thread("kept"))
    ledger = saved.ledger
    sessions = ledger.sessions
    found = sessions.get_by_key_or_none("gone", app_name="langgraph")
    if isinstance(ledger, AsyncLedger):
        found = await found
        await saved.saver.adelete_thread("gone")
        assert await sessions.get_by_key_or_none("gone", app_name="langgraph") is None
    else:
        assert isinstance(ledger, Ledger)
        saved.saver.delete_thread("gone")
        assert sessions.get_by_key_or_none("gone", app_name="langgraph") is None
    assert found is not None and found.id.startswith("langgraph.")

    assert (await ours.state(_thread("gone"))).values == {}
    assert [item async for item in _list(saved.saver, _thread("gone"))] == []
    assert (await ours.state(_thread("kept"))).values["log"][-1] == "after"
