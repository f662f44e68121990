"""A graph whose nodes write and read long-term memory through ``store=``, paused at an
interrupt in one process and resumed in another: ``python _memory_graph.py URL MODE
start|resume`` prints what the run gave."""

from __future__ import annotations

import asyncio
import sys
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from langgraph.types import Command, interrupt

from agentledger import AsyncLedger, Ledger
from agentledger.integrations.langgraph import (
    AsyncLedgerSaver,
    AsyncLedgerStore,
    LedgerSaver,
    LedgerStore,
)

CONFIG: Any = {"configurable": {"thread_id": "cook-for-ada"}}


class State(TypedDict):
    user: str
    answer: str


def ask(state: State) -> dict[str, str]:
    return {"answer": interrupt("what shall I cook?")}


def remember(state: State, *, store: BaseStore) -> dict[str, str]:
    store.put(("memories", state["user"]), "food", {"likes": "soup"})
    return {}


def recall(state: State, *, store: BaseStore) -> dict[str, str]:
    (found,) = store.search(("memories", state["user"]), filter={"likes": "soup"})
    return {"answer": f"{state['answer']} with {found.value['likes']}"}


async def aremember(state: State, *, store: BaseStore) -> dict[str, str]:
    await store.aput(("memories", state["user"]), "food", {"likes": "soup"})
    return {}


async def arecall(state: State, *, store: BaseStore) -> dict[str, str]:
    (found,) = await store.asearch(("memories", state["user"]), filter={"likes": "soup"})
    return {"answer": f"{state['answer']} with {found.value['likes']}"}


def builder(nodes: tuple[Any, Any]) -> StateGraph[State]:
    graph = StateGraph(State)
    graph.add_node("remember", nodes[0])
    graph.add_node("ask", ask)
    graph.add_node("recall", nodes[1])
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "ask")
    graph.add_edge("ask", "recall")
    graph.add_edge("recall", END)
    return graph


def step_input(step: str) -> Any:
    return {"user": "ada", "answer": ""} if step == "start" else Command(resume="pasta")


def run_sync(url: str, step: str) -> None:
    with Ledger(url) as ledger:
        graph = builder((remember, recall)).compile(
            checkpointer=LedgerSaver(ledger), store=LedgerStore(ledger)
        )
        result = graph.invoke(step_input(step), CONFIG)
        print(result.get("answer") or graph.get_state(CONFIG).next)


async def run_async(url: str, step: str) -> None:
    async with AsyncLedger(url) as ledger:
        graph = builder((aremember, arecall)).compile(
            checkpointer=AsyncLedgerSaver(ledger), store=AsyncLedgerStore(ledger)
        )
        result = await graph.ainvoke(step_input(step), CONFIG)
        print(result.get("answer") or (await graph.aget_state(CONFIG)).next)


if __name__ == "__main__":
    url, mode, step = sys.argv[1:4]
    if mode == "async":
        asyncio.run(run_async(url, step))
    else:
        run_sync(url, step)
