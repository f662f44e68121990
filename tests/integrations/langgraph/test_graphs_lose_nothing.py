"""Graphs whose saves once failed on some database, run on every backend, sync and
async, each compared with LangGraph's own InMemorySaver (issue "LangGraph II"):

- a ``DeltaChannel`` puts tuples in the checkpoint's metadata
  (``counters_since_delta_snapshot``), stored as JSON the way LangGraph's SQL savers
  store it;
- a fan-out consumes several trigger channels in one step, each saved as a version
  without a value (PostgreSQL once inferred their NULLs as text);
- a node that interrupts twice writes ``__resume__`` twice in one batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.conformance.test_utils import (
    generate_checkpoint,
    generate_config,
    generate_metadata,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command, interrupt

from agentledger import ValidationError
from agentledger.testing import tier

from .conftest import Saved
from .test_graphs import Runner, State, _history_shapes, _step, _thread, around, draft_then_send


def _extended(state: list[str], writes: Sequence[list[str]]) -> list[str]:
    return [*state, *(item for write in writes for item in write)]


class DeltaState(TypedDict):
    log: Annotated[list[str], DeltaChannel(_extended, snapshot_frequency=2)]


def delta_graph() -> StateGraph[Any]:
    """first -> second -> third, each adding to a ``DeltaChannel``."""
    builder = StateGraph(DeltaState)
    previous = START
    for name in ("first", "second", "third"):
        builder.add_node(name, _step(name))
        builder.add_edge(previous, name)
        previous = name
    return builder


def _look(state: State) -> dict[str, list[str]]:
    """A node that reads the state and changes nothing."""
    return {}


def fan_out_graph() -> StateGraph[State]:
    """start -> (a, b, c in one step, each changing nothing): the step's checkpoint
    changes only the three trigger channels it consumed, each now without a value."""
    builder = StateGraph(State)
    builder.add_node("start", _step("start"))
    builder.add_edge(START, "start")
    for name in ("a", "b", "c"):
        builder.add_node(name, _look)
        builder.add_edge("start", name)
    return builder


def _ask(question: str) -> Any:
    def node(state: State) -> dict[str, list[str]]:
        return {"log": [f"{question}:{interrupt(question)}"]}

    return node


def interrupted_subgraph_graph() -> StateGraph[State]:
    """outer -> inner (left and right in one step, changing nothing, then ``ask``
    interrupts) -> after."""
    inner = StateGraph(State)
    inner.add_node("left", _look)
    inner.add_node("right", _look)
    inner.add_node("ask", _ask("go on?"))
    for name in ("left", "right"):
        inner.add_edge(START, name)
        inner.add_edge(name, "ask")
    return around(inner)


def ask_twice_graph() -> StateGraph[State]:
    """draft -> confirm (interrupts twice, for two answers) -> send."""

    def confirm(state: State) -> dict[str, list[str]]:
        first = interrupt("first?")
        second = interrupt("second?")
        return {"log": [f"confirmed:{first}+{second}"]}

    return draft_then_send("confirm", confirm)


def _without_ids(result: dict[str, Any]) -> dict[str, Any]:
    """A graph's result with each interrupt as its value (an interrupt's id is made from
    task ids, which differ from run to run)."""
    if "__interrupt__" not in result:
        return result
    return {**result, "__interrupt__": [item.value for item in result["__interrupt__"]]}


async def _run_both(saved: Saved, make: Any, inputs: Sequence[Any]) -> tuple[Any, Any]:
    """Run ``inputs`` in turn on a graph of ``make`` over the saver under test and over
    an InMemorySaver; each side's results and state history."""
    sides = []
    for saver in (saved.saver, InMemorySaver()):
        runner = Runner(make(), saver, saved.mode)
        results = [_without_ids(await runner.invoke(value, _thread("t"))) for value in inputs]
        sides.append((results, await _history_shapes(runner, "t")))
    return sides[0], sides[1]


@tier("driver")
async def test_a_delta_channel_graph_saves_its_tuple_metadata_as_json_lists(saved: Saved) -> None:
    ours, reference = await _run_both(saved, delta_graph, [{"log": []}])

    assert ours == reference
    assert ours[0][-1] == {"log": ["first", "second", "third"]}
    counters = [
        metadata["counters_since_delta_snapshot"]
        for metadata in await _every_metadata(saved)
        if "counters_since_delta_snapshot" in metadata
    ]
    pairs = [pair for counter in counters for pair in counter.values()]
    assert pairs and all(type(pair) is list and len(pair) == 2 for pair in pairs)


async def _every_metadata(saved: Saved) -> list[dict[str, Any]]:
    if saved.mode == "async":
        return [dict(item.metadata) async for item in saved.saver.alist(_thread("t"))]
    return [dict(item.metadata) for item in saved.saver.list(_thread("t"))]


@tier("driver")
async def test_a_fan_out_saves_every_consumed_trigger_without_a_value(saved: Saved) -> None:
    ours, reference = await _run_both(saved, fan_out_graph, [{"log": []}])

    assert ours == reference
    assert ours[0][-1] == {"log": ["start"]}


@tier("driver")
async def test_an_interrupted_subgraph_after_a_fan_out_pauses_and_resumes(saved: Saved) -> None:
    ours, reference = await _run_both(
        saved, interrupted_subgraph_graph, [{"log": []}, Command(resume="yes")]
    )

    assert ours == reference
    paused, done = ours[0]
    assert paused["__interrupt__"] == ["go on?"]
    assert done == {"log": ["outer", "outer", "go on?:yes", "after"]}


@tier("driver")
async def test_a_node_interrupting_twice_resumes_with_both_answers(saved: Saved) -> None:
    ours, reference = await _run_both(
        saved,
        ask_twice_graph,
        [{"log": []}, Command(resume="one"), Command(resume="two")],
    )

    assert ours == reference
    assert ours[0][-1] == {"log": ["draft", "confirmed:one+two", "send"]}


async def test_metadata_comes_back_as_json_makes_it_and_a_filter_matches_the_same_way(
    saved: Saved,
) -> None:
    config = generate_config("t")
    metadata = generate_metadata(pair=(1, 2), by_number={3: "three"})
    await saved.saver.aput(config, generate_checkpoint(), metadata, {})

    found = [item.metadata async for item in saved.saver.alist(None, filter={"pair": (1, 2)})]

    assert len(found) == 1
    assert found[0]["pair"] == [1, 2]
    assert found[0]["by_number"] == {"3": "three"}


@tier("logic")
async def test_metadata_with_nan_is_refused_with_its_path(saved: Saved) -> None:
    metadata = generate_metadata(score=float("nan"))
    with pytest.raises(ValidationError, match=r"metadata\['score'\]: nan is not a JSON number"):
        await saved.saver.aput(generate_config("t"), generate_checkpoint(), metadata, {})
