"""LedgerSession keeps the SDK's Session protocol, written from its documented semantics
(agents/memory/session.py), on every backend with an async driver."""

from __future__ import annotations

from typing import Any

import pytest
from agents.memory.session import Session, _session_accepts_wrapper
from agents.memory.session_settings import SessionSettings
from agents.models.fake_id import FAKE_RESPONSES_ID
from agents.run_context import RunContextWrapper

from agentledger import ConflictError, UsageError, ValidationError
from agentledger.integrations import framework_of
from agentledger.integrations.openai_agents import LedgerSession
from agentledger.testing import tier

from .conftest import Store


def user(text: str) -> dict[str, object]:
    return {"role": "user", "content": text}


def reply(id: str, text: str) -> dict[str, object]:
    return {
        "id": id,
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


async def test_it_is_a_session_of_the_sdk_and_takes_the_run_context(store: Store) -> None:
    session = LedgerSession("s", store.ledger)
    assert isinstance(session, Session)
    assert _session_accepts_wrapper(session)
    wrapper = RunContextWrapper(context=None)
    await session.add_items([user("hi")], wrapper=wrapper)
    assert await session.get_items(wrapper=wrapper) == [user("hi")]
    assert await session.pop_item(wrapper=wrapper) == user("hi")
    await session.clear_session(wrapper=wrapper)


async def test_a_new_session_has_no_items_and_reading_creates_nothing(store: Store) -> None:
    session = LedgerSession("never-written", store.ledger)
    assert await session.get_items() == []
    assert await session.get_items(5) == []
    assert await session.pop_item() is None
    await session.clear_session()
    assert await store.ledger.sessions.get_by_key_or_none("never-written") is None


async def test_items_come_back_in_the_order_they_were_added(store: Store) -> None:
    session = LedgerSession("s", store.ledger)
    await session.add_items([user("one"), reply("msg_1", "two")])
    await session.add_items([user("three")])
    assert await session.get_items() == [user("one"), reply("msg_1", "two"), user("three")]


async def test_items_round_trip_exactly(store: Store) -> None:
    tricky = {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "naïve café ✓ 日本語 🙂 \u200b"},
            {"type": "input_text", "text": "'); DROP TABLE agentledger_messages; --"},
            {"type": "input_text", "text": '%s %(x)s ? :name \\ " \n\t'},
        ],
        "nested": {"deep": [[{"n": 2**53 + 1, "f": 0.1, "neg": -1e-300}], None, True, False]},
        "empty": {"list": [], "dict": {}, "text": ""},
    }
    function_call = {
        "type": "function_call",
        "call_id": "call_1",
        "name": "lookup",
        "arguments": '{"q": "x"}',
    }
    session = LedgerSession("s", store.ledger)
    await session.add_items([tricky, function_call])
    assert await LedgerSession("s", store.ledger).get_items() == [tricky, function_call]


async def test_a_limit_returns_the_latest_items_in_chronological_order(store: Store) -> None:
    session = LedgerSession("s", store.ledger)
    await session.add_items([user(str(n)) for n in range(5)])
    assert await session.get_items(2) == [user("3"), user("4")]
    assert await session.get_items(9) == [user(str(n)) for n in range(5)]


async def test_no_limit_means_the_settings_limit_and_then_everything(store: Store) -> None:
    limited = LedgerSession("s", store.ledger, session_settings=SessionSettings(limit=2))
    await limited.add_items([user(str(n)) for n in range(4)])
    assert await limited.get_items() == [user("2"), user("3")]
    assert await limited.get_items(3) == [user("1"), user("2"), user("3")]
    assert len(await LedgerSession("s", store.ledger).get_items()) == 4
    as_dict = LedgerSession("s", store.ledger, session_settings={"limit": 1})
    assert await as_dict.get_items() == [user("3")]


async def test_a_limit_of_zero_returns_no_items(store: Store) -> None:
    session = LedgerSession("s", store.ledger, session_settings=SessionSettings(limit=0))
    await session.add_items([user("one")])
    assert await session.get_items() == []
    assert await session.get_items(0) == []


@tier("logic")
async def test_a_negative_limit_is_refused(store: Store) -> None:
    with pytest.raises(ValidationError, match="limit"):
        await LedgerSession("s", store.ledger).get_items(-1)


async def test_an_empty_batch_changes_nothing(store: Store) -> None:
    session = LedgerSession("s", store.ledger)
    await session.add_items([])
    assert await store.ledger.sessions.get_by_key_or_none("s") is None
    await session.add_items([user("one")])
    before = await session.record()
    await session.add_items([])
    assert (await session.record()).revision == before.revision


async def test_pop_item_removes_and_returns_the_newest_item(store: Store) -> None:
    session = LedgerSession("s", store.ledger)
    await session.add_items([user("one"), user("two")])
    assert await session.pop_item() == user("two")
    assert await session.get_items() == [user("one")]
    assert await session.pop_item() == user("one")
    assert await session.pop_item() is None


async def test_clear_session_removes_every_item_and_keeps_the_session(store: Store) -> None:
    session = LedgerSession("s", store.ledger)
    await session.add_items([user("one"), user("two")])
    kept = await session.record()
    await session.clear_session()
    assert await session.get_items() == []
    assert (await session.record()).id == kept.id
    await session.add_items([user("three")])
    assert await session.get_items() == [user("three")]
    assert [m.seq for m in await store.ledger.messages.all(kept.id)] == [3]


async def test_the_sdk_session_id_is_the_key_of_an_openai_agents_session(store: Store) -> None:
    session = LedgerSession("user-123", store.ledger)
    await session.add_items([user("hi")])
    stored = await store.ledger.sessions.get_by_key("user-123")
    assert framework_of(stored.id) == "openai-agents"
    assert stored.external_key == "user-123"
    assert (await store.ledger.messages.all(stored.id))[0].content == user("hi")


@pytest.mark.parametrize(
    "session_id",
    ["a", "x" * 1024, "with spaces / and:colons", "ünïcødé 🙂", "'; DELETE FROM x; --"],
)
async def test_any_text_the_sdk_takes_works_as_a_session_id(store: Store, session_id: str) -> None:
    await LedgerSession(session_id, store.ledger).add_items([user(session_id)])
    assert await LedgerSession(session_id, store.ledger).get_items() == [user(session_id)]


@tier("logic")
async def test_an_empty_session_id_is_refused_with_its_name(store: Store) -> None:
    with pytest.raises(ValidationError, match="key"):
        await LedgerSession("", store.ledger).add_items([user("hi")])


async def test_sessions_of_other_ids_and_scopes_are_separate(store: Store) -> None:
    await LedgerSession("s", store.ledger).add_items([user("plain")])
    await LedgerSession("t", store.ledger).add_items([user("other id")])
    await LedgerSession("s", store.ledger, user_id="ada").add_items([user("ada's")])
    assert await LedgerSession("s", store.ledger).get_items() == [user("plain")]
    assert await LedgerSession("s", store.ledger, user_id="ada").get_items() == [user("ada's")]


async def test_a_retried_batch_with_item_ids_stores_nothing_twice(store: Store) -> None:
    session = LedgerSession("s", store.ledger)
    batch = [reply("msg_1", "one"), reply("msg_2", "two")]
    await session.add_items(batch)
    await LedgerSession("s", store.ledger).add_items(batch)
    assert await session.get_items() == batch


async def test_an_item_id_seen_again_on_other_content_is_another_item(store: Store) -> None:
    session = LedgerSession("s", store.ledger)
    await session.add_items([reply("msg_1", "one")])
    await session.add_items([user("new"), reply("msg_1", "reused id")])
    expected = [reply("msg_1", "one"), user("new"), reply("msg_1", "reused id")]
    assert await session.get_items() == expected


async def test_a_repeated_item_in_one_batch_is_stored_each_time(store: Store) -> None:
    session = LedgerSession("s", store.ledger)
    await session.add_items([reply("msg_1", "one"), reply("msg_1", "one")])
    assert await session.get_items() == [reply("msg_1", "one")] * 2


async def test_items_without_ids_are_stored_each_time(store: Store) -> None:
    session = LedgerSession("s", store.ledger)
    await session.add_items([user("yes")])
    await session.add_items([user("yes"), user("yes")])
    assert await session.get_items() == [user("yes")] * 3


async def test_the_sdks_placeholder_id_is_not_a_key(store: Store) -> None:
    session = LedgerSession("s", store.ledger)
    first, second = reply(FAKE_RESPONSES_ID, "one"), reply(FAKE_RESPONSES_ID, "two")
    await session.add_items([first, second])
    await session.add_items([first])
    assert await session.get_items() == [first, second, first]


@pytest.mark.parametrize(
    ("bad", "named"),
    [({"x", "y"}, "set"), (b"bytes", "bytes"), (float("nan"), "NaN")],
    ids=["set", "bytes", "nan"],
)
@tier("logic")
async def test_a_non_json_item_is_refused_and_nothing_of_its_batch_stored(
    store: Store, bad: object, named: str
) -> None:
    session = LedgerSession("s", store.ledger)
    await session.add_items([user("before")])
    with pytest.raises(ValidationError, match=r"items\[1\]") as caught:
        await session.add_items([user("fine"), {"role": "user", "content": bad}])
    assert isinstance(caught.value, ValueError)
    assert caught.value.path is not None and caught.value.path.startswith("items[1]")
    assert await session.get_items() == [user("before")]


@pytest.mark.parametrize("items", [[["not", "a", "dict"]], "text", None], ids=repr)
@tier("logic")
async def test_something_other_than_a_list_of_dicts_is_refused(store: Store, items: object) -> None:
    with pytest.raises(ValidationError, match="item"):
        await LedgerSession("s", store.ledger).add_items(items)  # type: ignore[arg-type]
    assert await store.ledger.sessions.get_by_key_or_none("s") is None


@tier("logic")
async def test_a_closed_session_refuses_every_call_and_leaves_a_borrowed_ledger_open(
    store: Store,
) -> None:
    session = LedgerSession("s", store.ledger)
    await session.add_items([user("hi")])
    await session.close()
    await session.close()
    calls = [
        session.get_items(),
        session.add_items([user("late")]),
        session.add_items([]),
        session.pop_item(),
        session.clear_session(),
        session.record(),
        session.ledger_session_id(),
    ]
    for call in calls:
        with pytest.raises(UsageError, match=r"^LedgerSession is closed"):
            await call
    assert await LedgerSession("s", store.ledger).get_items() == [user("hi")]


async def test_from_url_opens_a_ledger_of_its_own(shared_store: Store) -> None:
    store = shared_store
    assert store.url is not None
    session = LedgerSession.from_url("s", url=store.url, session_settings={"limit": 1})
    await session.add_items([user("one"), user("two")])
    assert await session.get_items() == [user("two")]
    await session.close()
    assert await LedgerSession("s", store.ledger).get_items() == [user("one"), user("two")]


async def test_a_borrowed_engine_stays_usable_after_close(store: Store) -> None:
    await store.ledger.sessions.exists("warm-up")  # an in-memory store migrates on first use
    session = LedgerSession("s", engine=store.ledger.engine)
    await session.add_items([user("hi")])
    await session.close()
    assert await LedgerSession("s", store.ledger).get_items() == [user("hi")]


async def test_it_takes_a_ledger_or_an_engine(store: Store) -> None:
    with pytest.raises(ValidationError, match="ledger or an engine"):
        LedgerSession("s")
    with pytest.raises(ValidationError, match="ledger or an engine"):
        LedgerSession("s", store.ledger, engine=store.ledger.engine)
    with pytest.raises(ValidationError, match="AsyncLedger"):
        LedgerSession("s", store.ledger.sync_ledger)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="session_id must be a string"):
        LedgerSession(42, store.ledger)  # type: ignore[arg-type]


async def test_a_session_deleted_meanwhile_is_made_again_on_the_next_items(store: Store) -> None:
    session = LedgerSession("s", store.ledger)
    await session.add_items([user("one")])
    await store.ledger.sessions.delete_by_key("s")
    assert await session.get_items() == []
    await session.add_items([user("two")])
    assert await LedgerSession("s", store.ledger).get_items() == [user("two")]


async def test_a_key_held_by_another_frameworks_session_is_refused(store: Store) -> None:
    await store.ledger.sessions.create("langgraph.01J0000000000000000000000A", external_key="s")
    with pytest.raises(ConflictError, match="langgraph"):
        await LedgerSession("s", store.ledger).get_items()


async def test_messages_written_without_the_sdk_read_as_message_items(store: Store) -> None:
    record = await store.ledger.sessions.create(external_key="s")
    await store.ledger.messages.append(record.id, {"role": "user", "content": "typed in"})
    assert await LedgerSession("s", store.ledger).get_items() == [user("typed in")]


async def test_a_batch_run_again_after_its_commit_stores_nothing_twice(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``ledger.run`` does after a lost connection whose commit went through."""
    once = store.ledger.run

    async def committed_then_lost(fn: Any, *, retries: int = 3) -> Any:
        await once(fn, retries=0)
        return await once(fn, retries=retries)

    monkeypatch.setattr(store.ledger, "run", committed_then_lost)
    session = LedgerSession("s", store.ledger)
    await session.add_items([user("no id"), user("no id"), reply("msg_1", "with id")])
    monkeypatch.undo()
    assert await session.get_items() == [user("no id"), user("no id"), reply("msg_1", "with id")]


async def test_refusing_unseen_items_stores_nothing_on_history_not_read(store: Store) -> None:
    mine = LedgerSession("s", store.ledger, unseen_items="refuse")
    other = LedgerSession("s", store.ledger)
    await mine.add_items([user("first")])
    assert await mine.get_items() == [user("first")]
    await other.add_items([user("meanwhile")])
    with pytest.raises(ConflictError) as caught:
        await mine.add_items([user("on stale history")])
    assert caught.value.reason == "stale"
    assert await other.get_items() == [user("first"), user("meanwhile")]
    assert len(await mine.get_items()) == 2
    await mine.add_items([user("after reading")])
    assert (await other.get_items())[-1] == user("after reading")


async def test_refusing_unseen_items_lets_a_session_follow_its_own_writes(store: Store) -> None:
    mine = LedgerSession("s", store.ledger, unseen_items="refuse")
    assert await mine.get_items() == []
    await mine.add_items([user("one")])
    await mine.add_items([user("two")])
    assert await mine.pop_item() == user("two")
    await mine.add_items([user("three")])
    assert await mine.get_items() == [user("one"), user("three")]


@tier("logic")
async def test_unseen_items_takes_append_or_refuse(store: Store) -> None:
    with pytest.raises(ValidationError, match="unseen_items"):
        LedgerSession("s", store.ledger, unseen_items="ignore")  # type: ignore[arg-type]


async def test_refusing_unseen_items_covers_a_session_found_empty(store: Store) -> None:
    mine = LedgerSession("s", store.ledger, unseen_items="refuse")
    assert await mine.get_items() == []
    await LedgerSession("s", store.ledger).add_items([user("first, from another writer")])
    with pytest.raises(ConflictError) as caught:
        await mine.add_items([user("on an empty history")])
    assert caught.value.reason == "stale"
    assert await mine.get_items() == [user("first, from another writer")]


async def test_refusing_unseen_items_counts_a_pop_as_this_sessions_own_write(store: Store) -> None:
    mine = LedgerSession("s", store.ledger, unseen_items="refuse")
    await mine.add_items([user("one"), user("two")])
    assert await mine.pop_item() == user("two")
    await mine.add_items([user("three")])
    await LedgerSession("s", store.ledger).add_items([user("meanwhile")])
    await mine.clear_session()
    await mine.add_items([user("after clearing")])
    assert await mine.get_items() == [user("after clearing")]


async def test_the_ledger_session_id_is_the_records(store: Store) -> None:
    session = LedgerSession("s", store.ledger)
    id = await session.ledger_session_id()
    assert id == (await session.record()).id == (await store.ledger.sessions.get_by_key("s")).id
