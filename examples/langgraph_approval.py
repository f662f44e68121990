"""A LangGraph graph that pauses for a human's approval and resumes in a second run.

The graph proposes a refund, then ``interrupt()`` asks a human to approve it: the run
ends there, its checkpoint stored by agentledger. Run the script again (a new
process): it finds the paused thread, answers with ``Command(resume=...)`` and the
graph goes on from where it stopped. The thread is an agentledger session, so
``agentledger sessions list`` shows it.

    python examples/langgraph_approval.py [DATABASE_URL]   (default sqlite:///agentledger.db)
"""

from __future__ import annotations

import sys
from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from agentledger import Ledger
from agentledger.integrations.langgraph import LedgerSaver

THREAD = {"configurable": {"thread_id": "refund-order-1042"}}


class Refund(TypedDict, total=False):
    order: str
    amount: int
    decision: str
    outcome: str


def propose(state: Refund) -> Refund:
    """Stands in for a model deciding what to refund."""
    return {"amount": 120}


def approve(state: Refund) -> Refund:
    """Pause until a human answers; on resume, ``interrupt`` returns the answer."""
    decision = interrupt({"question": f"refund {state['amount']} EUR for order {state['order']}?"})
    return {"decision": decision}


def pay(state: Refund) -> Refund:
    """Act on the decision."""
    paid = state["decision"].startswith("approved")
    return {"outcome": f"refunded {state['amount']} EUR" if paid else "refund refused"}


def build() -> StateGraph[Refund]:
    builder = StateGraph(Refund)
    builder.add_node("propose", propose)
    builder.add_node("approve", approve)
    builder.add_node("pay", pay)
    builder.add_edge(START, "propose")
    builder.add_edge("propose", "approve")
    builder.add_edge("approve", "pay")
    builder.add_edge("pay", END)
    return builder


def main(url: str | None = None) -> None:
    with Ledger(url) as ledger:
        ledger.upgrade()
        graph = build().compile(checkpointer=LedgerSaver(ledger))
        state = graph.get_state(THREAD)
        if not state.values:
            paused = graph.invoke({"order": "1042"}, THREAD)
            print(f"paused: {paused['__interrupt__'][0].value['question']}")
            print("run the script again to approve")
        elif state.next:
            print(f"found the paused thread, waiting in {state.next[0]}")
            done = graph.invoke(Command(resume="approved by ada"), THREAD)
            print(f"resumed: {done['decision']}; {done['outcome']}")
        else:
            print(f"already done: {state.values['outcome']}")
        session = ledger.sessions.get_by_key("refund-order-1042", app_name="langgraph")
        steps = len(list(graph.get_state_history(THREAD)))
        print(f"thread refund-order-1042 is session {session.id}, {steps} checkpoints")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
