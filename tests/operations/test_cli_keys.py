"""Finding a session by the id the user knows: ``sessions show`` and ``delete`` take a
framework's key (a LangGraph thread id, an ADK or OpenAI Agents session id) as well as
agentledger's id; ``sessions list`` shows the key, filters by it and puts it in
``--json``; an id that names two sessions is an error listing both."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, TypedDict

import pytest
from google.adk.events import Event
from google.genai import types
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from agentledger import AsyncLedger, Ledger, migrations
from agentledger.cli import EXIT_ERROR, EXIT_OK, EXIT_USAGE, main
from agentledger.integrations.adk import LedgerSessionService
from agentledger.integrations.langgraph import LedgerSaver
from agentledger.integrations.openai_agents import LedgerSession

from ._output import one_error


class Refund(TypedDict):
    order: str
    answer: str


def _ask(state: Refund) -> dict[str, str]:
    approved = interrupt(f"refund order {state['order']}?")
    return {"answer": f"approved by {approved}"}


def _langgraph_thread(url: str) -> tuple[str, int]:
    """A thread ``refund-order-1042`` paused at an interrupt: its session id and how many
    checkpoints LangGraph's own history holds."""
    graph = StateGraph(Refund)
    graph.add_node("ask", _ask)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", END)
    with Ledger(url) as ledger:
        app = graph.compile(checkpointer=LedgerSaver(ledger))
        config: Any = {"configurable": {"thread_id": "refund-order-1042"}}
        app.invoke({"order": "1042", "answer": ""}, config)
        history = len(list(app.get_state_history(config)))
        thread = ledger.sessions.get_by_key("refund-order-1042", app_name="langgraph")
        return thread.id, history


async def _adk_session(url: str) -> tuple[str, str]:
    """An ADK session of app ``trips``, user ``ada``: its agentledger id and its ADK id."""
    async with AsyncLedger(url) as ledger:
        service = LedgerSessionService(ledger)
        session = await service.create_session(app_name="trips", user_id="ada")
        event = Event(
            author="user",
            content=types.Content(role="user", parts=[types.Part(text="A train to Lisbon")]),
        )
        await service.append_event(session, event)
        found = await ledger.sessions.get_by_key(session.id, app_name="trips", user_id="ada")
        return found.id, session.id


async def _openai_session(url: str) -> str:
    """An OpenAI Agents session ``chat-1``: its agentledger id."""
    async with AsyncLedger(url) as ledger:
        session = LedgerSession("chat-1", ledger)
        await session.add_items([{"role": "user", "content": "What is the weather in Porto?"}])
        return await session.ledger_session_id()


@pytest.fixture(scope="module")
def frameworks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One SQLite ledger holding a session of each framework, made through its
    integration, as a user's harness would."""
    url = f"sqlite:///{tmp_path_factory.mktemp('keys') / 'frameworks.db'}"
    migrations.upgrade(url)
    thread, history = _langgraph_thread(url)
    adk, adk_key = asyncio.run(_adk_session(url))
    return {
        "url": url,
        "langgraph": thread,
        "langgraph checkpoints": history,
        "adk": adk,
        "adk key": adk_key,
        "openai": asyncio.run(_openai_session(url)),
    }


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'keys.db'}"
    migrations.upgrade(url)
    return url


# --- show by a framework's key ----------------------------------------------------------------


def test_show_finds_a_langgraph_thread_by_its_thread_id(
    frameworks: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "show", "refund-order-1042", "--url", frameworks["url"]]) == EXIT_OK

    out = capsys.readouterr().out
    assert out.startswith(f"session   {frameworks['langgraph']}\nkey       refund-order-1042\n")


def test_show_of_a_langgraph_thread_counts_its_langgraph_checkpoints(
    frameworks: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "show", frameworks["langgraph"], "--url", frameworks["url"]]) == 0

    out = capsys.readouterr().out
    history = frameworks["langgraph checkpoints"]
    assert history > 1
    assert f"langgraph checkpoints: {history}, newest first" in out
    section = out.split("langgraph checkpoints:")[1].splitlines()
    assert section[1].split() == ["CHECKPOINT", "NAMESPACE", "STEP", "SOURCE", "CREATED", "SIZE"]
    assert len(section) == 2 + history


def test_show_of_a_langgraph_thread_says_when_it_has_more_checkpoints_than_shown(
    frameworks: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    command = ["sessions", "show", "refund-order-1042", "--checkpoints", "1"]
    assert main([*command, "--url", frameworks["url"]]) == EXIT_OK

    assert "langgraph checkpoints: more than 1, newest 1 shown" in capsys.readouterr().out


def test_show_of_a_session_without_langgraph_checkpoints_has_no_langgraph_section(
    frameworks: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "show", "chat-1", "--url", frameworks["url"]]) == EXIT_OK
    assert "langgraph" not in capsys.readouterr().out


def test_show_finds_an_adk_session_by_its_adk_id(
    frameworks: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "show", frameworks["adk key"], "--url", frameworks["url"]]) == 0

    out = capsys.readouterr().out
    assert out.startswith(f"session   {frameworks['adk']}\nkey       {frameworks['adk key']}\n")
    assert "scope     app trips    user ada" in out


def test_show_finds_an_openai_agents_session_by_its_session_id(
    frameworks: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "show", "chat-1", "--url", frameworks["url"]]) == EXIT_OK

    out = capsys.readouterr().out
    assert out.startswith(f"session   {frameworks['openai']}\nkey       chat-1\n")
    assert "What is the weather in Porto?" in out


def test_show_still_finds_a_session_by_its_agentledger_id(
    frameworks: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "show", frameworks["openai"], "--url", frameworks["url"]]) == 0
    assert capsys.readouterr().out.startswith(f"session   {frameworks['openai']}\n")


def test_show_of_a_key_outside_the_scope_given_is_not_found(
    frameworks: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    command = ["sessions", "show", "chat-1", "--app", "trips", "--url", frameworks["url"]]
    assert main(command) == EXIT_ERROR
    line = one_error(capsys.readouterr().err)
    assert "no session 'chat-1': no session has that id, nor that key in app 'trips'" in line


def test_show_of_an_unknown_id_or_key_is_one_error_line(
    frameworks: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "show", "no such thread", "--url", frameworks["url"]]) == EXIT_ERROR
    line = one_error(capsys.readouterr().err)
    assert "no session 'no such thread': no session has that id, nor that key in any scope" in line


# --- list: the key column, the filter, JSON ------------------------------------------------


def test_list_shows_each_session_s_key(
    frameworks: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "list", "--url", frameworks["url"]]) == EXIT_OK

    rows = {line.split()[0]: line.split()[1] for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows[frameworks["langgraph"]] == "refund-order-1042"
    assert rows[frameworks["adk"]] == frameworks["adk key"]
    assert rows[frameworks["openai"]] == "chat-1"


def test_list_says_paused_for_a_langgraph_thread_paused_at_an_interrupt(
    frameworks: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "list", "--url", frameworks["url"]]) == EXIT_OK

    lines = capsys.readouterr().out.splitlines()[1:]
    statuses = {line.split()[0]: line.split()[3] for line in lines if "refund-order-1042" in line}
    assert statuses == {frameworks["langgraph"]: "paused"}


def test_list_filters_by_key(
    frameworks: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "list", "--key", "chat-1", "--url", frameworks["url"]]) == EXIT_OK

    rows = capsys.readouterr().out.splitlines()[1:]
    assert [row.split()[0] for row in rows] == [frameworks["openai"]]


def test_list_json_carries_the_key(
    frameworks: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    command = ["sessions", "list", "--json", "--key", "refund-order-1042"]
    assert main([*command, "--url", frameworks["url"]]) == EXIT_OK

    (item,) = json.loads(capsys.readouterr().out)
    assert item["id"] == frameworks["langgraph"]
    assert item["external_key"] == "refund-order-1042"
    assert item["app_name"] == "langgraph"


def test_list_shows_a_dash_for_a_session_without_a_key(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with Ledger(db) as ledger:
        ledger.sessions.create("plain", title="No key here")
    assert main(["sessions", "list", "--url", db]) == EXIT_OK
    assert capsys.readouterr().out.splitlines()[1].split()[:3] == ["plain", "-", "No"]


# --- ambiguity --------------------------------------------------------------------------------


def test_an_id_that_is_another_session_s_key_is_an_error_listing_both(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with Ledger(db) as ledger:
        ledger.sessions.create("bugfix-431")
        ledger.sessions.create("langgraph.x1", app_name="langgraph", external_key="bugfix-431")

    assert main(["sessions", "show", "bugfix-431", "--url", db]) == EXIT_USAGE
    line = one_error(capsys.readouterr().err)
    assert "'bugfix-431' names 2 sessions" in line
    assert "bugfix-431 (its agentledger id)" in line
    assert "langgraph.x1 (its key, app 'langgraph', user -)" in line
    assert "pass the agentledger id of the one you mean" in line


@pytest.fixture
def two_scopes(db: str) -> str:
    """The key ``s-1`` of ADK sessions of two users: ada's adk.1 and bob's adk.2."""
    with Ledger(db) as ledger:
        ledger.sessions.create("adk.1", app_name="trips", user_id="ada", external_key="s-1")
        ledger.sessions.create("adk.2", app_name="trips", user_id="bob", external_key="s-1")
    return db


def test_a_key_used_in_two_scopes_is_an_error_suggesting_app_and_user(
    two_scopes: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "show", "s-1", "--url", two_scopes]) == EXIT_USAGE
    line = one_error(capsys.readouterr().err)
    assert "'s-1' names 2 sessions" in line and "adk.1 (its key, app 'trips', user 'ada')" in line
    assert "or narrow the key with --app and --user" in line


def test_user_narrows_a_key_used_in_two_scopes_to_one_session(
    two_scopes: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "show", "s-1", "--user", "bob", "--url", two_scopes]) == EXIT_OK
    assert capsys.readouterr().out.startswith("session   adk.2\n")


def test_a_session_whose_key_is_its_own_id_is_found_once(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with Ledger(db) as ledger:
        ledger.sessions.create("same", external_key="same")

    assert main(["sessions", "show", "same", "--url", db]) == EXIT_OK
    assert capsys.readouterr().out.startswith("session   same\nkey       same\n")


# --- delete by key ----------------------------------------------------------------------------


def test_delete_takes_a_key(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    with Ledger(db) as ledger:
        ledger.sessions.create("openai-agents.1", external_key="chat-1")
        ledger.sessions.create("kept")

    assert main(["sessions", "delete", "chat-1", "--url", db]) == EXIT_OK

    out = capsys.readouterr().out
    assert out.startswith("deleted session openai-agents.1 (key 'chat-1'; 0 messages, 0 steps")
    with Ledger(db) as ledger:
        assert [item.id for item in ledger.sessions.list().items] == ["kept"]


def test_delete_deletes_nothing_when_one_of_its_ids_names_no_session(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with Ledger(db) as ledger:
        ledger.sessions.create("one")

    assert main(["sessions", "delete", "one", "nope", "--url", db]) == EXIT_ERROR

    assert "no session 'nope'" in one_error(capsys.readouterr().err)
    with Ledger(db) as ledger:
        assert ledger.sessions.exists("one")


def test_delete_deletes_nothing_when_one_of_its_ids_names_two_sessions(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with Ledger(db) as ledger:
        ledger.sessions.create("one")
        ledger.sessions.create("two", app_name="a", external_key="k")
        ledger.sessions.create("three", app_name="b", external_key="k")

    assert main(["sessions", "delete", "one", "k", "--url", db]) == EXIT_USAGE

    assert "'k' names 2 sessions" in one_error(capsys.readouterr().err)
    with Ledger(db) as ledger:
        assert len(ledger.sessions.list().items) == 3


# --- show's header lines ----------------------------------------------------------------------


def test_show_prints_a_line_break_in_the_title_escaped_on_the_title_s_line(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with Ledger(db) as ledger:
        ledger.sessions.create("t", title="a\nstatus    completed")

    assert main(["sessions", "show", "t", "--url", db]) == EXIT_OK

    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "title     a\\nstatus    completed"
    assert lines[2].startswith("status    active")
