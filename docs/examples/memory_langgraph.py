from typing import TypedDict

from langgraph.graph import START, StateGraph
from langgraph.store.base import BaseStore

from agentledger import Ledger
from agentledger.integrations.langgraph import LedgerSaver, LedgerStore


def embed(texts: list[str]) -> list[list[float]]:
    """A stand-in for a real embedding model: counts of a few letters."""
    return [[float(text.count(letter)) for letter in "aeiost"] for text in texts]


class State(TypedDict):
    user: str
    reply: str


def reply(state: State, *, store: BaseStore) -> dict[str, str]:
    memories = ("memories", state["user"])
    store.put(memories, "food", {"text": "likes pasta with tomatoes"})
    store.put(memories, "travel", {"text": "takes the train to Porto"})
    (best,) = store.search(memories, query="what does she eat?", limit=1)
    return {"reply": f"remembered: {best.value['text']}"}


with Ledger.in_memory() as ledger:
    # The checkpointer and the store on one ledger: one database, one migration stream.
    store = LedgerStore(ledger, index={"dims": 6, "embed": embed, "fields": ["text"]})
    graph = (
        StateGraph(State)
        .add_node("reply", reply)
        .add_edge(START, "reply")
        .compile(checkpointer=LedgerSaver(ledger), store=store)
    )
    done = graph.invoke({"user": "ada"}, {"configurable": {"thread_id": "t-1"}})
    print(done["reply"])
    # The same memories, read through agentledger's own API.
    print([item.key for item in ledger.memory.search(("memories", "ada"))])
