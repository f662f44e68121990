"""Sessions made through the real framework integrations, as the viewer shows them on
every database: a LangGraph thread's checkpoints (in LangGraph's own tables) as a tree
per namespace with forks, the latest, metadata and pending writes and interrupts; OpenAI
Agents items and ADK events as text with their tool calls and results folded; the
framework filter and the "made by" column."""

from __future__ import annotations

import asyncio
import json
import pickle
import re
from collections.abc import Iterator
from typing import Any, TypedDict

import pytest
from google.adk.events import Event
from google.genai import types
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from sqlalchemy.engine import URL
from starlette.testclient import TestClient

from agentledger import AsyncLedger, Ledger, ValidationError
from agentledger.integrations.adk import LedgerSessionService
from agentledger.integrations.langgraph import LedgerSaver
from agentledger.integrations.openai_agents import LedgerSession
from agentledger.langgraph_records import SHOWN_VALUE_BYTES
from agentledger.ui import create_app
from agentledger.ui.views import interrupt_asks

from ._data import HOSTILE, NOW


class Draft(TypedDict, total=False):
    topic: str
    answer: str
    sources: list[str]


def _draft(state: Draft) -> Draft:
    # A list is stored apart from the checkpoint (a short text inside it).
    return {"answer": f"a draft about {state['topic']}", "sources": ["tea.org", HOSTILE]}


def _review(state: Draft) -> Draft:
    approved = interrupt({"question": "approve?", "draft": state["answer"]})
    return {"answer": state["answer"] + (" (approved)" if approved else "")}


def _outline(state: Draft) -> Draft:
    return {"topic": state["topic"].strip()}


def _ask(state: Draft) -> Draft:
    return {"answer": interrupt({"question": f"refund order {state['topic']}?"})}


def _refund_graph() -> StateGraph[Draft]:
    """One node that asks, then ends with the answer."""
    graph = StateGraph(Draft)
    graph.add_node("ask", _ask)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", END)
    return graph


def _langgraph_thread(url: URL) -> str:
    """A thread paused at an interrupt, then forked by replaying from an earlier
    checkpoint, with one JSON-typed pending write, its draft made by a subgraph (a
    namespace of its own); returns its session id."""
    subgraph = StateGraph(Draft)
    subgraph.add_node("outline", _outline)
    subgraph.add_node("write", _draft)
    subgraph.add_edge(START, "outline")
    subgraph.add_edge("outline", "write")
    subgraph.add_edge("write", END)
    graph = StateGraph(Draft)
    graph.add_node("draft", subgraph.compile())
    graph.add_node("review", _review)
    graph.add_edge(START, "draft")
    graph.add_edge("draft", "review")
    graph.add_edge("review", END)
    with Ledger(url) as ledger:
        app = graph.compile(checkpointer=LedgerSaver(ledger))
        config: Any = {"configurable": {"thread_id": "essay-1"}}
        app.invoke({"topic": "tea"}, config)
        history = list(app.get_state_history(config))
        app.invoke(None, history[1].config)  # a second child of the step-0 checkpoint
        latest = app.get_state(config).config["configurable"]["checkpoint_id"]
        notes = [(0, "notes", ("json", b'{"n": 1}'))]
        # A JSON value large enough to be stored compressed, still small enough to show.
        notes.append((1, "summary", ("json", json.dumps({"s": "tea " * 300}).encode())))
        # Compressed small, too large to show once decompressed: its type and size.
        notes.append((2, "essay", ("json", json.dumps({"s": "tea " * 5000}).encode())))
        # What a graph with the pickle fallback on may store: never loaded.
        notes.append((3, "pickled", ("pickle", pickle.dumps({"s": "tea"}))))
        ledger.langgraph().put_writes("essay-1", "", latest, "task-json", notes)
        return ledger.sessions.get_by_key("essay-1", app_name="langgraph").id


async def _openai_session(url: str) -> str:
    ledger = AsyncLedger(url)
    try:
        session = LedgerSession("chat-1", ledger)
        await session.add_items(
            [
                {"role": "user", "content": "What is the weather in Porto?"},
                {
                    "type": "function_call",
                    "name": "get_weather",
                    "call_id": "call-w1",
                    "arguments": '{"city": "Porto"}',
                },
                {"type": "function_call_output", "call_id": "call-w1", "output": "sunny, 21 C"},
                {
                    "type": "message",
                    "role": "assistant",
                    "id": "msg-1",
                    "content": [{"type": "output_text", "text": f"Sunny. {HOSTILE}"}],
                },
            ]
        )
        return await session.ledger_session_id()
    finally:
        await ledger.close()


async def _adk_session(url: str) -> str:
    ledger = AsyncLedger(url)
    try:
        service = LedgerSessionService(ledger)
        session = await service.create_session(app_name="trips", user_id="ada")
        call = types.FunctionCall(id="fc-1", name="find_train", args={"to": "Lisbon"})
        answer = types.FunctionResponse(id="fc-1", name="find_train", response={"at": "9:05"})
        for author, part in [
            ("user", types.Part(text="A train to Lisbon, please")),
            ("planner", types.Part(function_call=call)),
            ("planner", types.Part(function_response=answer)),
            ("planner", types.Part(text="The 9:05 train.")),
        ]:
            role = "user" if author == "user" else "model"
            event = Event(author=author, content=types.Content(role=role, parts=[part]))
            await service.append_event(session, event)
        found = await ledger.sessions.get_by_key(session.id, app_name="trips", user_id="ada")
        return found.id
    finally:
        await ledger.close()


@pytest.fixture(scope="module")
def made(migrated_url: URL) -> dict[str, str]:
    url = migrated_url.render_as_string(hide_password=False)
    return {
        "langgraph": _langgraph_thread(migrated_url),
        "openai-agents": asyncio.run(_openai_session(url)),
        "adk": asyncio.run(_adk_session(url)),
    }


@pytest.fixture(scope="module")
def client(migrated_url: URL, made: dict[str, str]) -> Iterator[TestClient]:
    url = migrated_url.render_as_string(hide_password=False)
    with TestClient(create_app(url, clock=lambda: NOW)) as client:
        yield client


@pytest.mark.parametrize("framework", ["langgraph", "openai-agents", "adk"])
def test_each_frameworks_session_is_made_by_it_and_found_by_its_filter(
    client: TestClient, made: dict[str, str], framework: str
) -> None:
    listed = client.get("/sessions.json", params={"framework": framework}).json()["sessions"]
    assert [(item["id"], item["framework"]) for item in listed] == [(made[framework], framework)]
    page = client.get("/sessions", params={"framework": framework}).text
    assert made[framework] in page and f"<td>{framework}</td>" in page


def test_a_langgraph_thread_shows_its_checkpoints_as_a_tree_with_the_fork_and_latest(
    client: TestClient, made: dict[str, str]
) -> None:
    view = client.get(f"/sessions/{made['langgraph']}.json").json()["langgraph"]
    root = view["namespaces"][0]
    assert root["checkpoint_ns"] == "" and root["count"] == 5
    ((first, fork),) = root["branches"]
    assert (first["step"], first["source"], fork["step"]) == (-1, "input", 0)
    assert fork["fork"] and len(fork["branches"]) == 2
    (paused,), (copied, replayed) = fork["branches"]
    assert paused["interrupts"] and not paused["latest"]
    assert (copied["source"], copied["parent_checkpoint_id"]) == ("fork", fork["checkpoint_id"])
    assert replayed["latest"] and replayed["checkpoint_id"] == root["latest"]
    page = client.get(f"/sessions/{made['langgraph']}").text
    assert "fork: 2 branches" in page and "LangGraph checkpoints" in page


def test_each_subgraph_run_of_a_langgraph_thread_is_a_namespace_with_its_own_latest(
    client: TestClient, made: dict[str, str]
) -> None:
    view = client.get(f"/sessions/{made['langgraph']}.json").json()["langgraph"]
    _, *subgraphs = view["namespaces"]
    assert len(subgraphs) == 2 and view["count"] == 5 + 4 + 4
    for space in subgraphs:
        assert space["checkpoint_ns"].startswith("draft:") and space["count"] == 4
        (chain,) = space["branches"]
        assert [n["latest"] for n in chain] == [False, False, False, True]
        assert chain[-1]["checkpoint_id"] == space["latest"]
    page = client.get(f"/sessions/{made['langgraph']}").text
    assert f"Namespace <code>{subgraphs[0]['checkpoint_ns']}</code>" in page


def test_langgraph_pending_writes_show_decoded_and_large_ones_as_type_and_size(
    client: TestClient, made: dict[str, str]
) -> None:
    view = client.get(f"/sessions/{made['langgraph']}.json").json()["langgraph"]
    ((_, fork),) = view["namespaces"][0]["branches"]
    _, (_, replayed) = fork["branches"]
    (note,) = [w for w in replayed["writes"] if w["channel"] == "notes"]
    assert (note["decoded"], note["value"]) == (True, {"n": 1})
    (summary,) = [w for w in replayed["writes"] if w["channel"] == "summary"]
    assert (summary["type"], summary["decoded"]) == ("json+zlib", True)
    assert summary["value"] == {"s": "tea " * 300}
    (essay,) = [w for w in replayed["writes"] if w["channel"] == "essay"]
    assert (essay["type"], essay["decoded"], essay["value"]) == ("json+zlib", False, None)
    assert essay["size"] < SHOWN_VALUE_BYTES  # stored small, too large once decompressed
    page = client.get(f"/sessions/{made['langgraph']}").text
    assert re.search(r"json\+zlib · \d+ B", page) and "&#34;n&#34;: 1" in page


def test_a_pickled_langgraph_value_never_leaves_the_database_and_shows_type_and_size(
    migrated_url: URL, client: TestClient, made: dict[str, str]
) -> None:
    with Ledger(migrated_url) as ledger:
        rows = ledger.langgraph().session_rows(made["langgraph"])
    (stored,) = [w for w in rows.writes if w.channel == "pickled"]
    assert (stored.type, stored.value) == ("pickle", None)
    view = client.get(f"/sessions/{made['langgraph']}.json").json()["langgraph"]
    ((_, fork),) = view["namespaces"][0]["branches"]
    _, (_, replayed) = fork["branches"]
    (pickled,) = [w for w in replayed["writes"] if w["channel"] == "pickled"]
    assert (pickled["type"], pickled["decoded"], pickled["value"]) == ("pickle", False, None)
    assert pickled["size"] == stored.size > 0


def test_a_langgraph_interrupt_shows_the_question_it_asks(
    client: TestClient, made: dict[str, str]
) -> None:
    view = client.get(f"/sessions/{made['langgraph']}.json").json()["langgraph"]
    ((_, fork),) = view["namespaces"][0]["branches"]
    (paused,), _ = fork["branches"]
    (interrupt_write,) = paused["interrupts"]
    assert (interrupt_write["type"], interrupt_write["decoded"]) == ("msgpack", True)
    ((ask,),) = [interrupt_write["asks"]]
    assert ask == {
        "question": "approve?",
        "value": {"question": "approve?", "draft": "a draft about tea"},
        "more": True,
    }
    page = client.get(f"/sessions/{made['langgraph']}").text
    assert '<q class="question">approve?</q><pre>' in page


def test_a_langgraph_thread_paused_at_an_interrupt_reads_paused_not_active(
    client: TestClient, made: dict[str, str]
) -> None:
    answer = client.get(f"/sessions/{made['langgraph']}.json").json()
    assert (answer["session"]["status"], answer["session"]["shown_status"]) == ("active", "paused")
    paused = answer["langgraph"]["paused"]
    assert paused["checkpoint_id"] == answer["langgraph"]["namespaces"][0]["latest"]
    assert [ask["question"] for ask in paused["interrupts"]] == ["approve?"]
    page = client.get(f"/sessions/{made['langgraph']}").text
    assert 'class="status status-paused">paused at an interrupt<' in page
    assert "status-active" not in page


def test_the_session_list_shows_a_thread_paused_at_an_interrupt_as_paused(
    client: TestClient, made: dict[str, str]
) -> None:
    listed = client.get("/sessions.json").json()["sessions"]
    shown = {item["id"]: (item["status"], item["shown_status"]) for item in listed}
    assert shown[made["langgraph"]] == ("active", "paused")
    assert shown[made["adk"]] == ("active", "active")
    page = client.get("/sessions", params={"framework": "langgraph"}).text
    assert 'class="status status-paused">paused at an interrupt<' in page


def test_each_langgraph_checkpoint_shows_the_graphs_state_decoded(
    client: TestClient, made: dict[str, str]
) -> None:
    view = client.get(f"/sessions/{made['langgraph']}.json").json()["langgraph"]
    ((first, fork),) = view["namespaces"][0]["branches"]
    # The input checkpoint: the run's input, in LangGraph's own __start__ channel.
    assert [(v["channel"], v["value"]) for v in first["state"]] == [("__start__", {"topic": "tea"})]
    assert fork["state"] == [{"channel": "topic", "decoded": True, "value": "tea"}]
    (paused,), _ = fork["branches"]
    state = {v["channel"]: v["value"] for v in paused["state"] if v["decoded"]}
    assert state == {
        "answer": "a draft about tea",
        "sources": ["tea.org", HOSTILE],
        "topic": "tea",
    }
    assert view["paused"]["state"] == paused["state"]


def test_an_interrupt_asking_only_a_question_shows_it_once() -> None:
    (ask,) = interrupt_asks({"question": "ok?"})
    assert (ask["question"], ask["more"]) == ("ok?", False)
    (text,) = interrupt_asks("ok?")
    assert (text["question"], text["more"]) == ("ok?", False)


def test_a_langgraph_state_value_is_escaped(client: TestClient, made: dict[str, str]) -> None:
    page = client.get(f"/sessions/{made['langgraph']}").text
    assert "<script>" not in page and "<img" not in page
    assert "&lt;script&gt;alert(\\&#34;x\\&#34;)&lt;/script&gt;" in page


def test_a_langgraph_thread_is_titled_by_its_thread_id_and_counts_its_checkpoints(
    client: TestClient, made: dict[str, str]
) -> None:
    page = client.get(f"/sessions/{made['langgraph']}").text
    assert '<h1 class="title">essay-1</h1>' in page
    assert "<dt>Checkpoints</dt><dd>13 in LangGraph's tables</dd>" in page


def test_a_langgraph_thread_is_found_and_listed_by_its_thread_id(
    client: TestClient, made: dict[str, str]
) -> None:
    listed = client.get("/sessions.json", params={"q": "essay-1"}).json()["sessions"]
    assert [item["id"] for item in listed] == [made["langgraph"]]
    page = client.get("/sessions", params={"q": "essay-1"}).text
    assert '<td class="title"><code class="key">essay-1</code></td>' in page


def test_openai_items_show_their_text_and_function_calls_folded_results_named_by_call(
    client: TestClient, made: dict[str, str]
) -> None:
    messages = client.get(f"/sessions/{made['openai-agents']}.json").json()["messages"]
    assert messages[0]["text"] == "What is the weather in Porto?"
    assert messages[1]["tools"] == [
        {"kind": "call", "name": "get_weather", "call_id": "call-w1", "body": {"city": "Porto"}}
    ]
    assert messages[2]["tools"] == [
        {"kind": "result", "name": "get_weather", "call_id": "call-w1", "body": "sunny, 21 C"}
    ]
    assert messages[3]["text"] == f"Sunny. {HOSTILE}"
    page = client.get(f"/sessions/{made['openai-agents']}").text
    assert '<summary>tool call <code>get_weather</code> <span class="dim">call-w1' in page
    assert "<summary>content as stored</summary>" in page


def test_openai_item_text_is_escaped(client: TestClient, made: dict[str, str]) -> None:
    page = client.get(f"/sessions/{made['openai-agents']}").text
    assert "<script>" not in page and "<img" not in page
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page


def test_adk_events_show_their_text_and_function_call_and_response_folded(
    client: TestClient, made: dict[str, str]
) -> None:
    messages = client.get(f"/sessions/{made['adk']}.json").json()["messages"]
    assert [m["role"] for m in messages] == ["user", "planner", "planner", "planner"]
    assert (messages[0]["text"], messages[3]["text"]) == (
        "A train to Lisbon, please",
        "The 9:05 train.",
    )
    assert messages[1]["tools"] == [
        {"kind": "call", "name": "find_train", "call_id": "fc-1", "body": {"to": "Lisbon"}}
    ]
    assert messages[2]["tools"] == [
        {"kind": "result", "name": "find_train", "call_id": "fc-1", "body": {"at": "9:05"}}
    ]
    page = client.get(f"/sessions/{made['adk']}").text
    assert "<summary>tool result <code>find_train</code>" in page


@pytest.mark.parametrize(
    ("limits", "named"),
    [
        ({"checkpoints": -1}, "checkpoints"),
        ({"writes": 10**9}, "writes"),
        ({"values": 10**5}, "values"),
    ],
)
def test_the_viewers_read_of_a_thread_refuses_a_bad_limit_naming_it(
    migrated_url: URL, made: dict[str, str], limits: dict[str, int], named: str
) -> None:
    with Ledger(migrated_url) as ledger, pytest.raises(ValidationError, match=named):
        ledger.langgraph().session_rows(made["langgraph"], **limits)


@pytest.mark.parametrize("ids", [["x"] * 1001, "one-id"])
def test_the_viewers_paused_look_up_refuses_too_many_ids_or_a_bare_string(
    migrated_url: URL, ids: Any
) -> None:
    with Ledger(migrated_url) as ledger, pytest.raises(ValidationError, match="session_ids"):
        ledger.langgraph().paused(ids)


# Last: it adds a thread to the module's database.
def test_a_thread_is_paused_only_while_its_newest_checkpoint_holds_an_interrupt(
    migrated_url: URL, made: dict[str, str]
) -> None:
    with Ledger(migrated_url) as ledger:
        app = _refund_graph().compile(checkpointer=LedgerSaver(ledger))
        config: Any = {"configurable": {"thread_id": "refund-paused-then-done"}}
        app.invoke({"topic": "7"}, config)
        thread = ledger.sessions.get_by_key("refund-paused-then-done", app_name="langgraph").id
        asked = ledger.langgraph().paused([thread, made["langgraph"], made["adk"]])
        app.invoke(Command(resume="approved"), config)
        answered = ledger.langgraph().paused([thread, made["langgraph"]])
    assert (asked, answered) == ([thread, made["langgraph"]], [made["langgraph"]])
