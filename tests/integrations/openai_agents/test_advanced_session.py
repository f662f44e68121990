"""LedgerAdvancedSession: the SDK's AdvancedSQLiteSession methods (branches, turns,
usage per turn and per session) on every backend with an async driver, written from
their documented behaviour; runs use the scripted model (no network)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import Runner
from agents.exceptions import MaxTurnsExceeded

from agentledger import NotFoundError, ValidationError
from agentledger.integrations.openai_agents import (
    BranchExistsError,
    BranchNotFoundError,
    LedgerAdvancedSession,
    LedgerRunHooks,
    LedgerSession,
)
from agentledger.integrations.openai_agents.advanced import BRANCH_STATE

from ._model import CACHED_TOKENS, INPUT_TOKENS, OUTPUT_TOKENS, ScriptedModel, agent
from .conftest import Store

CALL = INPUT_TOKENS + OUTPUT_TOKENS


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def answer(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


async def three_turns(store: Store, id: str = "chat") -> LedgerAdvancedSession:
    session = LedgerAdvancedSession(id, store.ledger)
    for n in ("one", "two", "three"):
        await session.add_items([user(f"question {n}"), answer(f"answer {n}")])
    return session


def contents(items: list[Any]) -> list[str]:
    return [item["content"] for item in items]


async def test_it_is_a_ledger_session_whose_main_branch_is_the_plain_sessions_items(
    store: Store,
) -> None:
    session = await three_turns(store)
    assert isinstance(session, LedgerSession)
    assert session.current_branch_id == "main"
    plain = LedgerSession("chat", store.ledger)
    assert await plain.get_items() == await session.get_items()


async def test_a_branch_from_a_turn_holds_the_turns_before_it_and_becomes_current(
    store: Store,
) -> None:
    session = await three_turns(store)
    assert await session.create_branch_from_turn(2, "retry") == "retry"
    assert session.current_branch_id == "retry"
    assert contents(await session.get_items()) == ["question one", "answer one"]
    await session.add_items([user("question two, again")])
    assert len(await session.get_items(branch_id="main")) == 6
    assert contents(await session.get_items())[-1] == "question two, again"


async def test_a_branch_is_an_agentledger_session_in_the_same_scope(store: Store) -> None:
    session = LedgerAdvancedSession("chat", store.ledger, app_name="app", user_id="ada")
    await session.add_items([user("hi"), answer("hello"), user("more")])
    main = await session.record()
    await session.create_branch_from_turn(2, "b")
    branch = await session.record()
    assert branch.id.startswith(f"{main.id}.")
    assert (branch.app_name, branch.user_id) == ("app", "ada")
    assert branch.state[BRANCH_STATE]["from_turn"] == 2
    assert [m.content for m in await store.ledger.messages.all(branch.id)] == [
        user("hi"),
        answer("hello"),
    ]


async def test_a_branch_name_is_made_when_none_is_given(store: Store) -> None:
    session = await three_turns(store)
    first = await session.create_branch_from_turn(3)
    await session.switch_to_branch("main")
    second = await session.create_branch_from_turn(3)
    assert first.startswith("branch_from_turn_3_") and second.startswith("branch_from_turn_3_")
    assert first != second


async def test_switching_changes_where_items_are_read_and_written(store: Store) -> None:
    session = await three_turns(store)
    await session.create_branch_from_turn(3, "b")
    await session.switch_to_branch("main")
    await session.add_items([user("on main")])
    assert contents(await session.get_items(1)) == ["on main"]
    await session.switch_to_branch("b")
    assert contents(await session.get_items()) == contents(await session.get_items(branch_id="b"))
    assert len(await session.get_items()) == 4


async def test_another_instance_finds_a_branch_by_its_id(store: Store) -> None:
    session = await three_turns(store)
    await session.create_branch_from_turn(2, "b")
    other = LedgerAdvancedSession("chat", store.ledger)
    assert other.current_branch_id == "main"
    await other.switch_to_branch("b")
    assert await other.get_items() == await session.get_items()


async def test_list_branches_gives_each_with_its_counts_oldest_first(store: Store) -> None:
    session = await three_turns(store)
    await session.create_branch_from_turn(3, "b")
    listed = await session.list_branches()
    assert [
        (b["branch_id"], b["message_count"], b["user_turns"], b["is_current"]) for b in listed
    ] == [("main", 6, 3, False), ("b", 4, 2, True)]
    assert all(isinstance(b["created_at"], str) for b in listed)


async def test_a_session_without_items_has_no_branches(store: Store) -> None:
    assert await LedgerAdvancedSession("empty", store.ledger).list_branches() == []


async def test_deleting_a_branch_removes_it_and_leaves_main(store: Store) -> None:
    session = await three_turns(store)
    await session.create_branch_from_turn(2, "b")
    id = (await session.record()).id
    await session.switch_to_branch("main")
    await session.delete_branch("b")
    assert [b["branch_id"] for b in await session.list_branches()] == ["main"]
    assert not await store.ledger.sessions.exists(id)
    assert len(await session.get_items()) == 6


async def test_the_current_branch_is_deleted_only_with_force(store: Store) -> None:
    session = await three_turns(store)
    await session.create_branch_from_turn(2, "b")
    with pytest.raises(ValidationError, match="current branch"):
        await session.delete_branch("b")
    assert session.current_branch_id == "b"
    await session.delete_branch("b", force=True)
    assert session.current_branch_id == "main"
    assert [b["branch_id"] for b in await session.list_branches()] == ["main"]


async def test_main_is_never_deleted(store: Store) -> None:
    session = await three_turns(store)
    with pytest.raises(ValidationError, match="main"):
        await session.delete_branch("main", force=True)


async def test_an_instance_on_a_deleted_branch_cannot_make_it_again(store: Store) -> None:
    session = await three_turns(store)
    await session.create_branch_from_turn(2, "b")
    other = LedgerAdvancedSession("chat", store.ledger)
    await other.delete_branch("b")
    with pytest.raises(BranchNotFoundError):
        await session.add_items([user("late")])
    assert [b["branch_id"] for b in await other.list_branches()] == ["main"]


async def test_a_deleted_branchs_id_names_a_new_branch_the_old_instance_never_writes(
    store: Store,
) -> None:
    session = await three_turns(store)
    await session.create_branch_from_turn(2, "b")
    other = LedgerAdvancedSession("chat", store.ledger)
    await other.delete_branch("b")
    await other.create_branch_from_turn(3, "b")
    with pytest.raises(BranchNotFoundError):
        await session.add_items([user("late")])
    assert len(await other.get_items()) == 4


async def test_clearing_removes_every_branch_and_returns_to_main(store: Store) -> None:
    session = await three_turns(store)
    await session.create_branch_from_turn(2, "b")
    await session.clear_session()
    assert session.current_branch_id == "main"
    assert await session.get_items() == []
    assert [b["branch_id"] for b in await session.list_branches()] == ["main"]
    with pytest.raises(BranchNotFoundError):
        await session.switch_to_branch("b")


async def test_pop_item_takes_from_the_current_branch_only(store: Store) -> None:
    session = await three_turns(store)
    await session.create_branch_from_turn(3, "b")
    assert await session.pop_item() == answer("answer two")
    assert len(await session.get_items(branch_id="main")) == 6


async def test_conversation_turns_are_the_user_messages_in_order(store: Store) -> None:
    session = await three_turns(store)
    turns = await session.get_conversation_turns()
    assert [(t["turn"], t["content"], t["can_branch"]) for t in turns] == [
        (1, "question one", True),
        (2, "question two", True),
        (3, "question three", True),
    ]


async def test_a_long_turn_is_previewed_and_kept_whole(store: Store) -> None:
    session = LedgerAdvancedSession("chat", store.ledger)
    await session.add_items([user("x" * 150)])
    (turn,) = await session.get_conversation_turns()
    assert turn["content"] == "x" * 100 + "..." and turn["full_content"] == "x" * 150


async def test_finding_turns_ignores_case_and_reads_text_parts(store: Store) -> None:
    session = await three_turns(store)
    parts = {"role": "user", "content": [{"type": "input_text", "text": "About PORTO"}]}
    await session.add_items([parts])
    assert [t["turn"] for t in await session.find_turns_by_content("QUESTION T")] == [2, 3]
    assert [t["turn"] for t in await session.find_turns_by_content("porto")] == [4]
    assert await session.find_turns_by_content("answer") == []


async def test_a_branch_from_content_starts_at_the_first_matching_turn(store: Store) -> None:
    session = await three_turns(store)
    assert await session.create_branch_from_content("two", "b") == "b"
    assert contents(await session.get_items()) == ["question one", "answer one"]


async def test_the_conversation_by_turns_names_each_items_type_and_tool(store: Store) -> None:
    session = LedgerAdvancedSession("chat", store.ledger)
    call = {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "sunny"}
    await session.add_items([answer("welcome"), user("weather?"), call, output, answer("sunny")])
    assert await session.get_conversation_by_turns() == {
        0: [{"type": "assistant", "tool_name": None}],
        1: [
            {"type": "user", "tool_name": None},
            {"type": "function_call", "tool_name": "weather"},
            {"type": "function_call_output", "tool_name": None},
            {"type": "assistant", "tool_name": None},
        ],
    }


async def test_tool_usage_counts_calls_per_tool_and_turn(store: Store) -> None:
    session = LedgerAdvancedSession("chat", store.ledger)
    model = ScriptedModel()
    await Runner.run(agent(model), "weather in Porto", session=session)
    await Runner.run(agent(model), "hello", session=session)
    await Runner.run(agent(model), "weather in Lisbon", session=session)
    assert await session.get_tool_usage() == [("weather", 1, 1), ("weather", 1, 3)]


async def test_usage_is_stored_per_turn_after_real_runs(store: Store) -> None:
    session = LedgerAdvancedSession("chat", store.ledger)
    model = ScriptedModel()
    first = await Runner.run(agent(model), "weather in Porto", session=session)
    await session.store_run_usage(first)
    second = await Runner.run(agent(model), "hello", session=session)
    await session.store_run_usage(second)
    turns = await session.get_turn_usage()
    assert isinstance(turns, list)
    assert [(t["user_turn_number"], t["requests"], t["total_tokens"]) for t in turns] == [
        (1, 2, 2 * CALL),
        (2, 1, CALL),
    ]
    one = await session.get_turn_usage(1)
    assert isinstance(one, dict)
    assert one["input_tokens_details"]["cached_tokens"] == 2 * CACHED_TOKENS
    assert one["output_tokens_details"]["reasoning_tokens"] == 0
    assert await session.get_turn_usage(9) == {}


async def test_session_usage_sums_the_turns_of_one_branch_or_of_all(store: Store) -> None:
    session = LedgerAdvancedSession("chat", store.ledger)
    model = ScriptedModel()
    await session.store_run_usage(await Runner.run(agent(model), "hi", session=session))
    await session.store_run_usage(await Runner.run(agent(model), "more", session=session))
    await session.create_branch_from_turn(2, "b")
    await session.store_run_usage(await Runner.run(agent(model), "other", session=session))
    main = await session.get_session_usage("main")
    assert main == {
        "requests": 2,
        "input_tokens": 2 * INPUT_TOKENS,
        "output_tokens": 2 * OUTPUT_TOKENS,
        "total_tokens": 2 * CALL,
        "total_turns": 2,
    }
    branch = await session.get_session_usage("b")
    assert branch is not None and (branch["requests"], branch["total_turns"]) == (1, 1)
    every = await session.get_session_usage()
    assert every is not None and (every["total_tokens"], every["total_turns"]) == (3 * CALL, 3)


async def test_a_session_without_stored_usage_has_none(store: Store) -> None:
    session = await three_turns(store)
    assert await session.get_session_usage() is None
    assert await session.get_turn_usage() == []


async def test_a_later_store_for_the_same_turn_takes_its_place(store: Store) -> None:
    session = LedgerAdvancedSession("chat", store.ledger)
    model = ScriptedModel()
    await session.store_run_usage(await Runner.run(agent(model), "hi", session=session))
    await session.store_run_usage(
        await Runner.run(agent(model), "weather in Porto", session=session)
    )
    await session.pop_item()
    await session.pop_item()
    await session.pop_item()
    await session.pop_item()  # turn 2 is gone, its usage with it
    assert [t["user_turn_number"] for t in await session.get_turn_usage()] == [1]  # type: ignore[index]
    usage = await session.get_session_usage()
    assert usage is not None and usage["total_turns"] == 1


async def test_usage_the_hooks_recorded_is_counted_once_in_the_ledger(store: Store) -> None:
    session = LedgerAdvancedSession("chat", store.ledger)
    hooks = LedgerRunHooks(session)
    result = await Runner.run(
        agent(ScriptedModel()), "weather in Porto", session=session, hooks=hooks
    )
    await session.store_run_usage(result)
    turn = await session.get_turn_usage(1)
    assert isinstance(turn, dict) and (turn["requests"], turn["total_tokens"]) == (2, 2 * CALL)
    id = await session.ledger_session_id()
    assert (await store.ledger.steps.usage(session_id=id)).total_tokens == 2 * CALL
    (step,) = await store.ledger.steps.by_kind(id, "turn")
    assert (
        step.run_id is not None and step.run_id == (await store.ledger.steps.last(id, 1))[0].run_id
    )


async def test_usage_without_the_hooks_is_held_by_the_turn_step(store: Store) -> None:
    session = LedgerAdvancedSession("chat", store.ledger)
    result = await Runner.run(agent(ScriptedModel()), "hello", session=session)
    await session.store_run_usage(result)
    id = await session.ledger_session_id()
    assert (await store.ledger.steps.usage(session_id=id)).total_tokens == CALL


async def test_the_hooks_record_steps_on_the_current_branch(store: Store) -> None:
    session = await three_turns(store)
    await session.create_branch_from_turn(2, "b")
    await Runner.run(
        agent(ScriptedModel()), "hello", session=session, hooks=LedgerRunHooks(session)
    )
    branch = await session.record()
    assert branch.status == "completed"
    assert [s.kind for s in await store.ledger.steps.last(branch.id, 5)] == ["model"]
    await session.switch_to_branch("main")
    assert await store.ledger.steps.last(await session.ledger_session_id(), 5) == []


async def test_a_run_failing_in_an_error_handler_is_recorded_as_failed(store: Store) -> None:
    session = LedgerAdvancedSession("chat", store.ledger)
    hooks = LedgerRunHooks(session)
    with pytest.raises(MaxTurnsExceeded):
        await Runner.run(
            agent(ScriptedModel()),
            "weather in Porto",
            session=session,
            hooks=hooks,
            max_turns=1,
            error_handlers=hooks.error_handlers(),
        )
    record = await session.record()
    assert record.status == "failed" and record.last_run is not None
    assert "MaxTurnsExceeded" in (record.last_run.error or "")
    assert record.last_run.usage.total_tokens == CALL


async def test_a_run_that_raised_is_recorded_as_failed_when_told(store: Store) -> None:
    session = LedgerAdvancedSession("chat", store.ledger)
    hooks = LedgerRunHooks(session)
    try:
        await Runner.run(
            agent(ScriptedModel()), "weather in Porto", session=session, hooks=hooks, max_turns=1
        )
    except MaxTurnsExceeded as error:
        await hooks.run_failed(error)
    record = await session.record()
    assert record.status == "failed" and record.last_run is not None
    assert record.last_run.usage.total_tokens == CALL


async def test_concurrent_writers_on_two_branches_lose_nothing(store: Store) -> None:
    session = await three_turns(store)
    await session.create_branch_from_turn(3, "b")
    on_main = LedgerAdvancedSession("chat", store.ledger)
    on_branch = LedgerAdvancedSession("chat", store.ledger)
    await on_branch.switch_to_branch("b")

    async def write(writer: LedgerAdvancedSession, name: str) -> None:
        for n in range(10):
            await writer.add_items([user(f"{name} {n}"), answer(f"{name} {n}")])

    await asyncio.gather(write(on_main, "main"), write(on_branch, "b"), write(session, "b2"))
    main, branch = await on_main.get_items(), await on_branch.get_items()
    assert len(main) == 6 + 20 and len(branch) == 4 + 40
    assert all(not c.startswith("main") for c in contents(branch))
    assert [c for c in contents(main) if c.startswith("main")] == [
        f"main {n}" for n in range(10) for _ in range(2)
    ]


@pytest.mark.parametrize("turn", [0, 4, -1, 2**40])
async def test_a_turn_out_of_range_is_refused_and_nothing_is_made(store: Store, turn: int) -> None:
    session = await three_turns(store)
    with pytest.raises(ValidationError, match=f"turn {turn} does not exist"):
        await session.create_branch_from_turn(turn, "b")
    assert session.current_branch_id == "main"
    assert [b["branch_id"] for b in await session.list_branches()] == ["main"]


@pytest.mark.parametrize("turn", ["1", 1.0, True, None])
async def test_a_turn_that_is_not_an_int_is_refused(store: Store, turn: Any) -> None:
    session = await three_turns(store)
    with pytest.raises(ValidationError, match="turn_number"):
        await session.create_branch_from_turn(turn, "b")


@pytest.mark.parametrize("name", ["", "   ", "\t", "x" * 256, "a\x00b", 7])
async def test_a_bad_branch_name_is_refused_and_nothing_is_made(store: Store, name: Any) -> None:
    session = await three_turns(store)
    with pytest.raises(ValidationError, match="branch_name"):
        await session.create_branch_from_turn(2, name)
    assert [b["branch_id"] for b in await session.list_branches()] == ["main"]


@pytest.mark.parametrize("name", ["main", "b"])
async def test_a_name_in_use_is_refused_and_the_branch_is_left_as_it_was(
    store: Store, name: str
) -> None:
    session = await three_turns(store)
    await session.create_branch_from_turn(3, "b")
    await session.switch_to_branch("main")
    with pytest.raises(BranchExistsError):
        await session.create_branch_from_turn(2, name)
    assert session.current_branch_id == "main"
    assert len(await session.get_items(branch_id="b")) == 4


async def test_an_unknown_branch_is_refused_by_switch_and_delete(store: Store) -> None:
    session = await three_turns(store)
    for call in (session.switch_to_branch("nope"), session.delete_branch("nope", force=True)):
        with pytest.raises(BranchNotFoundError) as raised:
            await call
        assert isinstance(raised.value, ValueError | NotFoundError)
    assert session.current_branch_id == "main"


async def test_reads_of_an_unknown_branch_find_nothing(store: Store) -> None:
    session = await three_turns(store)
    assert await session.get_items(branch_id="nope") == []
    assert await session.get_conversation_turns("nope") == []
    assert await session.get_turn_usage(branch_id="nope") == []
    assert await session.get_session_usage("nope") is None


async def test_no_match_for_a_branch_from_content_is_refused(store: Store) -> None:
    session = await three_turns(store)
    with pytest.raises(ValidationError, match="no user turn"):
        await session.create_branch_from_content("absent", "b")
    assert session.current_branch_id == "main"


async def test_a_store_run_usage_on_a_branch_without_turns_records_nothing(store: Store) -> None:
    session = await three_turns(store)
    await session.create_branch_from_turn(1, "empty")
    result = await Runner.run(
        agent(ScriptedModel()), "hi", session=LedgerSession("x", store.ledger)
    )
    await session.store_run_usage(result)
    assert await session.get_session_usage("empty") is None


async def test_switching_to_a_branch_made_again_by_another_instance_finds_the_new_one(
    store: Store,
) -> None:
    session = await three_turns(store)
    await session.create_branch_from_turn(2, "b")
    await session.switch_to_branch("main")
    other = LedgerAdvancedSession("chat", store.ledger)
    await other.delete_branch("b")
    await other.create_branch_from_turn(3, "b")
    await session.switch_to_branch("b")
    assert len(await session.get_items()) == 4
