"""Contract: a caller's keys. Sessions found by external key within their (app, user)
scope; messages and steps appended idempotently under a key."""

from __future__ import annotations

from typing import Any

import pytest

from agentledger import ConflictError, NewMessage, NewStep, NotFoundError, ValidationError

from .harness import Harness, tier

EMAIL = "ana.lima+agents@example.com"


class SessionKeyContract:
    """Sessions by the caller's external key: create, get, get-or-create, delete, list."""

    async def test_a_session_is_found_by_its_key_in_its_scope(self, harness: Harness) -> None:
        created = await harness.ledger.sessions.create(
            external_key="thread/42 ✓", app_name="support desk", user_id=EMAIL
        )
        found = await harness.ledger.sessions.get_by_key(
            "thread/42 ✓", app_name="support desk", user_id=EMAIL
        )
        assert found == created
        assert found.external_key == "thread/42 ✓"

    async def test_two_users_with_the_same_key_get_two_sessions(self, harness: Harness) -> None:
        sessions = harness.ledger.sessions
        ana, _ = await sessions.get_or_create_by_key("chat-1", app_name="app", user_id="ana")
        bob, _ = await sessions.get_or_create_by_key("chat-1", app_name="app", user_id="bob")
        assert ana.id != bob.id
        assert (await sessions.get_by_key("chat-1", app_name="app", user_id="bob")).id == bob.id

    async def test_a_null_scope_is_its_own_scope_not_any(self, harness: Harness) -> None:
        sessions = harness.ledger.sessions
        scoped = await sessions.create(external_key="k", app_name="app")
        unscoped = await sessions.create(external_key="k")
        assert (await sessions.get_by_key("k")).id == unscoped.id
        assert (await sessions.get_by_key("k", app_name="app")).id == scoped.id
        assert await sessions.get_by_key_or_none("k", app_name="app", user_id="u") is None

    async def test_keys_compare_exactly(self, harness: Harness) -> None:
        await harness.ledger.sessions.create(external_key="Thread")
        assert await harness.ledger.sessions.get_by_key_or_none("thread") is None
        assert await harness.ledger.sessions.get_by_key_or_none("Thread ") is None

    async def test_creating_a_key_twice_in_one_scope_is_a_conflict_exists(
        self, harness: Harness
    ) -> None:
        await harness.ledger.sessions.create(external_key="once", user_id="u")
        with pytest.raises(ConflictError) as raised:
            await harness.ledger.sessions.create(external_key="once", user_id="u")
        assert raised.value.reason == "exists"

    async def test_get_or_create_by_key_creates_once_then_finds(self, harness: Harness) -> None:
        sessions = harness.ledger.sessions
        first, created = await sessions.get_or_create_by_key(
            "thread-7", app_name="app", id="chosen-id", title="Trip", state={"n": 1}
        )
        again, created_again = await sessions.get_or_create_by_key("thread-7", app_name="app")
        assert (created, created_again) == (True, False)
        assert first.id == again.id == "chosen-id"
        assert (again.title, again.state, again.external_key) == ("Trip", {"n": 1}, "thread-7")

    @tier("driver")
    async def test_concurrent_get_or_create_by_key_makes_one_session(
        self, harness: Harness
    ) -> None:
        barrier = harness.barrier(8)

        async def creator(index: int) -> tuple[str, bool]:
            await barrier.wait()
            record, created = await harness.ledger.sessions.get_or_create_by_key(
                "contended", app_name="app", user_id=EMAIL
            )
            return record.id, created

        results = await harness.concurrently(8, creator)
        assert len({id for id, _ in results}) == 1
        assert sum(created for _, created in results) == 1

    async def test_get_or_create_by_key_with_an_id_taken_by_another_session_conflicts(
        self, harness: Harness
    ) -> None:
        await harness.ledger.sessions.create("taken")
        with pytest.raises(ConflictError) as raised:
            await harness.ledger.sessions.get_or_create_by_key("new-key", id="taken")
        assert raised.value.reason == "exists"

    async def test_get_by_an_unknown_key_is_not_found(self, harness: Harness) -> None:
        with pytest.raises(NotFoundError):
            await harness.ledger.sessions.get_by_key("nobody", app_name="app")

    async def test_delete_by_key_deletes_that_session_only(self, harness: Harness) -> None:
        sessions = harness.ledger.sessions
        kept = await sessions.create(external_key="k", user_id="ana")
        gone = await sessions.create(external_key="k", user_id="bob")
        await sessions.delete_by_key("k", user_id="bob")
        assert not await sessions.exists(gone.id)
        assert await sessions.exists(kept.id)
        with pytest.raises(NotFoundError):
            await sessions.delete_by_key("k", user_id="bob")

    async def test_a_scope_listing_can_include_keys_and_state_in_one_query(
        self, harness: Harness
    ) -> None:
        sessions = harness.ledger.sessions
        await sessions.create(external_key="a", app_name="app", user_id=EMAIL, state={"x": 1})
        await sessions.create(external_key="b", app_name="app", user_id=EMAIL)
        await sessions.create(external_key="c", app_name="app", user_id="someone else")
        page = await sessions.list(app_name="app", user_id=EMAIL, include=["external_key", "state"])
        assert sorted((item.external_key, item.state) for item in page.items) == [
            ("a", {"x": 1}),
            ("b", {}),
        ]

    async def test_the_default_listing_leaves_keys_and_state_out(self, harness: Harness) -> None:
        await harness.ledger.sessions.create(external_key="a", state={"x": 1})
        (item,) = (await harness.ledger.sessions.list()).items
        assert (item.external_key, item.state) == (None, None)

    async def test_app_names_and_user_ids_are_free_text_up_to_255_characters(
        self, harness: Harness
    ) -> None:
        app, user = "Support Desk (EU) ✓ " + "x" * 235, "ünïcode user@example.com"
        created = await harness.ledger.sessions.create(app_name=app, user_id=user)
        (item,) = (await harness.ledger.sessions.list(app_name=app, user_id=user)).items
        assert (item.id, item.app_name, item.user_id) == (created.id, app, user)

    @pytest.mark.parametrize(
        ("arguments", "path"),
        [
            ({"key": "a\x00b"}, "key"),
            ({"key": "x" * 1025}, "key"),
            ({"key": ""}, "key"),
            ({"key": "\ud800"}, "key"),
            ({"key": 7}, "key"),
            ({"key": "k", "app_name": "a\x00"}, "app_name"),
            ({"key": "k", "user_id": "u" * 256}, "user_id"),
            ({"key": "k", "app_name": ""}, "app_name"),
        ],
        ids=[
            "nul",
            "too-long",
            "empty",
            "surrogate",
            "not-text",
            "nul-app",
            "long-user",
            "empty-app",
        ],
    )
    @tier("logic")
    async def test_a_bad_key_or_scope_is_refused_naming_the_field(
        self, harness: Harness, arguments: dict[str, Any], path: str
    ) -> None:
        scope = {name: value for name, value in arguments.items() if name != "key"}
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.sessions.get_by_key(arguments["key"], **scope)
        assert raised.value.path == path
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.sessions.get_or_create_by_key(arguments["key"], **scope)
        assert raised.value.path == path

    @pytest.mark.parametrize(
        "key", ["a\x00b", "x" * 1025, "", "\udfff"], ids=["nul", "too-long", "empty", "surrogate"]
    )
    @tier("logic")
    async def test_create_refuses_a_bad_key_naming_external_key(
        self, harness: Harness, key: str
    ) -> None:
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.sessions.create(external_key=key)
        assert raised.value.path == "external_key"
        assert (await harness.ledger.sessions.list()).items == []

    async def test_a_key_of_1024_characters_is_stored_whole(self, harness: Harness) -> None:
        key = "ключ-" * 204 + "1234"
        created = await harness.ledger.sessions.create(external_key=key, user_id=EMAIL)
        assert (await harness.ledger.sessions.get_by_key(key, user_id=EMAIL)).id == created.id

    @tier("logic")
    async def test_an_unknown_listing_include_is_refused(self, harness: Harness) -> None:
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.sessions.list(include=["messages"])
        assert raised.value.path == "include"


def said(text: str, key: str | None = None) -> NewMessage:
    """A user message, with a caller's key when given."""
    return NewMessage(role="user", content=text, external_key=key)


class IdempotentAppendContract:
    """Messages and steps under a caller's key: a retry stores one row."""

    async def test_a_retried_append_with_the_same_key_stores_one_row(
        self, harness: Harness
    ) -> None:
        record = await harness.ledger.sessions.create("retry")
        first = await harness.ledger.messages.append(record, [said("hi", "item-1"), said("b")])
        # The retry of an append whose commit had an unknown outcome: its record is stale.
        again = await harness.ledger.messages.append(record, [said("hi", "item-1")])
        assert again.messages == first.messages[:1]
        assert again.session == first.session
        assert [m.seq for m in await harness.ledger.messages.all("retry")] == [1, 2]

    async def test_a_batch_wholly_stored_changes_nothing(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create("whole")
        first = await harness.ledger.messages.append(
            record, [said("a", "k1"), said("b", "k2")], state_delta={"set": {"n": 1}}
        )
        again = await harness.ledger.messages.append(
            "whole", [said("a", "k1"), said("b", "k2")], state_delta={"set": {"n": 2}}
        )
        assert again.session.revision == first.session.revision
        assert again.session.state == {"n": 1}
        assert [m.seq for m in again.messages] == [1, 2]

    async def test_a_batch_partly_stored_appends_only_the_new_messages(
        self, harness: Harness
    ) -> None:
        record = await harness.ledger.sessions.create("partly")
        first = await harness.ledger.messages.append(record, said("a", "k1"))
        second = await harness.ledger.messages.append(
            first.session, [said("a", "k1"), said("b", "k2"), said("c")]
        )
        assert [(m.seq, m.external_key) for m in second.messages] == [
            (1, "k1"),
            (2, "k2"),
            (3, None),
        ]
        assert second.session.revision == first.session.revision + 1

    async def test_a_stored_key_with_other_content_is_a_conflict_duplicate(
        self, harness: Harness
    ) -> None:
        record = await harness.ledger.sessions.create("dup")
        after = await harness.ledger.messages.append(record, said("original", "k"))
        with pytest.raises(ConflictError) as raised:
            await harness.ledger.messages.append(after.session, [said("new"), said("edited", "k")])
        assert raised.value.reason == "duplicate"
        assert [m.content for m in await harness.ledger.messages.all("dup")] == ["original"]

    async def test_keys_are_per_session(self, harness: Harness) -> None:
        for id in ("one", "two"):
            await harness.ledger.sessions.create(id)
            await harness.ledger.messages.append(id, said(f"in {id}", "same-key"))
        assert [m.content for m in await harness.ledger.messages.all("two")] == ["in two"]

    @tier("driver")
    async def test_concurrent_appends_of_one_key_store_one_row(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("racing")
        barrier = harness.barrier(8)

        async def appender(index: int) -> int:
            await barrier.wait()
            done = await harness.ledger.messages.append("racing", said("once", "event-1"))
            return int(done.messages[0].seq)

        assert set(await harness.concurrently(8, appender)) == {1}
        assert len(await harness.ledger.messages.all("racing")) == 1

    @tier("logic")
    async def test_a_key_repeated_within_a_batch_is_refused(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("twice")
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.messages.append("twice", [said("a", "k"), said("b", "k")])
        assert raised.value.path == "messages[1].external_key"

    @pytest.mark.parametrize(
        ("key", "path"),
        [("k" * 256, "messages[0].external_key"), ("a\x00", "messages[0].external_key")],
        ids=["too-long", "nul"],
    )
    @tier("logic")
    async def test_a_bad_message_key_is_refused_naming_it(
        self, harness: Harness, key: str, path: str
    ) -> None:
        await harness.ledger.sessions.create("bad-key")
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.messages.append("bad-key", said("x", key))
        assert raised.value.path == path

    async def test_a_retried_step_append_with_the_same_key_stores_one_row(
        self, harness: Harness
    ) -> None:
        await harness.ledger.sessions.create("steps")
        step = NewStep(kind="tool", name="search", output={"hits": 3}, external_key="call-1")
        first = await harness.ledger.steps.append("steps", step)
        again = await harness.ledger.steps.append("steps", [step, NewStep(kind="model")])
        assert again[0] == first[0]
        assert [s.seq for s in again] == [1, 2]
        assert await harness.ledger.steps.count("steps") == 2

    async def test_a_step_key_stored_with_other_content_is_a_conflict_duplicate(
        self, harness: Harness
    ) -> None:
        await harness.ledger.sessions.create("step-dup")
        await harness.ledger.steps.append("step-dup", NewStep(kind="tool", external_key="c"))
        with pytest.raises(ConflictError) as raised:
            await harness.ledger.steps.append("step-dup", NewStep(kind="model", external_key="c"))
        assert raised.value.reason == "duplicate"
        assert await harness.ledger.steps.count("step-dup") == 1

    @tier("driver")
    async def test_concurrent_step_appends_of_one_key_store_one_row(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("step-race")
        barrier = harness.barrier(8)

        async def appender(index: int) -> int:
            await barrier.wait()
            (step,) = await harness.ledger.steps.append(
                "step-race", NewStep(kind="tool", external_key="once")
            )
            return int(step.seq)

        assert set(await harness.concurrently(8, appender)) == {1}
        assert await harness.ledger.steps.count("step-race") == 1
