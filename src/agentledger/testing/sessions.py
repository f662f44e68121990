"""Contract: sessions, the unit of work and optimistic concurrency.

Every test takes a ``harness`` fixture (see ``agentledger.testing.Harness``) and
asserts one behaviour. A store that implements agentledger's API runs the suite by
subclassing the class in a test module and providing that fixture.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentledger import (
    CheckpointPayload,
    ConflictError,
    InvalidIdError,
    NewMessage,
    NewStep,
    NotFoundError,
    SessionRecord,
    TokenUsage,
    UsageError,
    ValidationError,
)

from .harness import Harness, tier

BAD_IDS = [
    "",
    "x" * 129,
    ".hidden",
    "a b",
    "a/b",
    "naïve",
    "semi;colon",
    "quote'",
    "%s",
    "?",
    ":p",
    "a\x00b",
    "\u202eevil",
    "\u210cello",
]  # the last: a look-alike H


class SessionContract:
    """Sessions: create, read, save, delete, list."""

    async def test_create_generates_a_time_sortable_id(self, harness: Harness) -> None:
        first = await harness.ledger.sessions.create()
        await asyncio.sleep(0.002)
        second = await harness.ledger.sessions.create()
        assert first.id < second.id
        assert len(first.id) == 26

    async def test_create_stores_the_given_fields(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create(
            "s-1", app_name="app", user_id="u1", title="Hello", model="m", state={"k": [1, "x"]}
        )
        stored = await harness.ledger.sessions.get("s-1")
        assert stored == record
        assert (stored.app_name, stored.user_id, stored.title, stored.model) == (
            "app",
            "u1",
            "Hello",
            "m",
        )
        assert stored.state == {"k": [1, "x"]}

    async def test_a_new_session_starts_at_revision_1_active_and_empty(
        self, harness: Harness
    ) -> None:
        record = await harness.ledger.sessions.create("fresh")
        assert record.revision == 1
        assert record.status == "active"
        assert record.state == {}
        assert (record.message_count, record.step_count, record.total_tokens) == (0, 0, 0)
        assert record.created_at == record.updated_at
        assert record.created_at.tzinfo is not None

    async def test_create_of_an_existing_id_is_a_conflict_exists(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("taken", title="first")
        with pytest.raises(ConflictError) as raised:
            await harness.ledger.sessions.create("taken", title="second")
        assert raised.value.reason == "exists"
        assert (await harness.ledger.sessions.get("taken")).title == "first"

    @pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
    @tier("logic")
    async def test_an_invalid_id_is_refused(self, harness: Harness, bad: str) -> None:
        with pytest.raises(InvalidIdError):
            await harness.ledger.sessions.create(bad)
        with pytest.raises(InvalidIdError):
            await harness.ledger.sessions.get(bad)

    async def test_ids_are_case_sensitive(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("Session-1", title="upper")
        await harness.ledger.sessions.create("session-1", title="lower")
        assert (await harness.ledger.sessions.get("Session-1")).title == "upper"
        assert (await harness.ledger.sessions.get("session-1")).title == "lower"

    @tier("logic")
    async def test_state_that_is_not_json_is_refused_naming_the_key(self, harness: Harness) -> None:
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.sessions.create("bad-state", state={"ok": 1, "when": {1, 2}})
        assert "state['when']" in str(raised.value)
        assert not await harness.ledger.sessions.exists("bad-state")

    @tier("logic")
    async def test_a_title_over_512_characters_is_refused(self, harness: Harness) -> None:
        with pytest.raises(ValidationError):
            await harness.ledger.sessions.create("long", title="t" * 513)

    async def test_get_of_an_unknown_id_raises_not_found(self, harness: Harness) -> None:
        with pytest.raises(NotFoundError):
            await harness.ledger.sessions.get("nobody")
        with pytest.raises(LookupError):
            await harness.ledger.sessions.get("nobody")

    async def test_get_or_none_and_exists_answer_without_raising(self, harness: Harness) -> None:
        assert await harness.ledger.sessions.get_or_none("nobody") is None
        assert await harness.ledger.sessions.exists("nobody") is False
        await harness.ledger.sessions.create("somebody")
        assert (await harness.ledger.sessions.get_or_none("somebody")) is not None
        assert await harness.ledger.sessions.exists("somebody") is True

    async def test_get_or_create_creates_then_gets(self, harness: Harness) -> None:
        made, created = await harness.ledger.sessions.get_or_create("goc", title="first")
        again, created_again = await harness.ledger.sessions.get_or_create("goc", title="other")
        assert (created, created_again) == (True, False)
        assert again == made
        assert again.title == "first"

    @tier("logic")
    async def test_get_or_create_refuses_unknown_fields(self, harness: Harness) -> None:
        with pytest.raises(ValidationError):
            await harness.ledger.sessions.get_or_create("goc", colour="red")

    @tier("driver")
    async def test_concurrent_get_or_create_makes_one_session(self, harness: Harness) -> None:
        barrier = harness.barrier(8)

        async def creator(index: int) -> tuple[SessionRecord, bool]:
            await barrier.wait()
            result: tuple[SessionRecord, bool] = await harness.ledger.sessions.get_or_create(
                "shared", title=f"by {index}"
            )
            return result

        results = await harness.concurrently(8, creator)
        assert sum(created for _, created in results) == 1
        assert len({record.title for record, _ in results}) == 1

    async def test_save_writes_title_model_and_state_and_bumps_the_revision(
        self, harness: Harness
    ) -> None:
        record = await harness.ledger.sessions.create("saved", title="a", state={"n": 1})
        saved = await harness.ledger.sessions.save(
            record.model_copy(update={"title": "b", "model": "m2", "state": {"n": 2}})
        )
        assert saved.revision == record.revision + 1
        assert (saved.title, saved.model, saved.state) == ("b", "m2", {"n": 2})
        assert saved.updated_at >= record.updated_at
        assert await harness.ledger.sessions.get("saved") == saved

    async def test_save_ignores_columns_it_does_not_own(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create("owned", app_name="a", user_id="u")
        edited = record.model_copy(
            update={
                "app_name": "other",
                "user_id": "other",
                "status": "failed",
                "message_count": 99,
                "state": {"x": 1},
            }
        )
        saved = await harness.ledger.sessions.save(edited)
        assert (saved.app_name, saved.user_id, saved.status, saved.message_count) == (
            "a",
            "u",
            "active",
            0,
        )
        assert saved.state == {"x": 1}

    async def test_saving_a_stale_record_is_a_conflict_and_changes_nothing(
        self, harness: Harness
    ) -> None:
        record = await harness.ledger.sessions.create("stale", state={"v": 0})
        winner = await harness.ledger.sessions.save(record.model_copy(update={"state": {"v": 1}}))
        with pytest.raises(ConflictError) as raised:
            await harness.ledger.sessions.save(record.model_copy(update={"state": {"v": 2}}))
        assert raised.value.reason == "stale"
        assert raised.value.retryable
        assert await harness.ledger.sessions.get("stale") == winner

    async def test_saving_after_a_delete_is_a_conflict_deleted_and_stays_deleted(
        self, harness: Harness
    ) -> None:
        record = await harness.ledger.sessions.create("gone")
        await harness.ledger.sessions.delete("gone")
        with pytest.raises(ConflictError) as raised:
            await harness.ledger.sessions.save(record.model_copy(update={"title": "back"}))
        assert raised.value.reason == "deleted"
        assert not await harness.ledger.sessions.exists("gone")

    @tier("logic")
    async def test_save_validates_an_edited_state(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create("edit")
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.sessions.save(
                record.model_copy(update={"state": {"x": float("nan")}})
            )
        assert "state['x']" in str(raised.value)
        assert (await harness.ledger.sessions.get("edit")).revision == 1

    async def test_delete_removes_the_session_and_everything_it_holds(
        self, harness: Harness
    ) -> None:
        record = await harness.ledger.sessions.create("doomed")
        await harness.ledger.messages.append(record, NewMessage(role="user", content="hi"))
        await harness.ledger.steps.append("doomed", NewStep(kind="model"))
        await harness.ledger.grants.grant("doomed", "tool:x")
        checkpoint = await harness.ledger.checkpoints.save("doomed", CheckpointPayload())
        await harness.ledger.sessions.delete("doomed")
        assert not await harness.ledger.sessions.exists("doomed")
        with pytest.raises(NotFoundError):
            await harness.ledger.checkpoints.get(checkpoint.ref)
        again = await harness.ledger.sessions.create("doomed")
        assert (again.message_count, again.step_count, again.checkpoint_seq) == (0, 0, 0)
        assert await harness.ledger.messages.all("doomed") == []
        assert await harness.ledger.steps.count("doomed") == 0
        assert await harness.ledger.grants.active("doomed") == []
        assert (await harness.ledger.checkpoints.list("doomed")).items == []

    async def test_delete_of_an_unknown_id_raises_not_found(self, harness: Harness) -> None:
        with pytest.raises(NotFoundError):
            await harness.ledger.sessions.delete("nobody")


class ListingContract:
    """Listing sessions: order, filters, keyset pagination."""

    async def _make(self, harness: Harness, count: int, **fields: Any) -> list[str]:
        ids = []
        for index in range(count):
            record = await harness.ledger.sessions.create(
                f"{fields.get('user_id', 's')}-{index}", **fields
            )
            ids.append(record.id)
        return ids

    async def test_list_is_newest_updated_first(self, harness: Harness) -> None:
        ids = await self._make(harness, 3)
        oldest = await harness.ledger.sessions.get(ids[0])
        await harness.ledger.sessions.save(oldest.model_copy(update={"title": "touched"}))
        page = await harness.ledger.sessions.list()
        assert [item.id for item in page.items] == [ids[0], ids[2], ids[1]]
        assert page.next_cursor is None

    async def test_list_filters_combine(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("a1", app_name="a", user_id="u1")
        await harness.ledger.sessions.create("a2", app_name="a", user_id="u2")
        await harness.ledger.sessions.create("b1", app_name="b", user_id="u1")
        page = await harness.ledger.sessions.list(app_name="a", user_id="u1")
        assert [item.id for item in page.items] == ["a1"]
        assert {i.id for i in (await harness.ledger.sessions.list(user_id="u1")).items} == {
            "a1",
            "b1",
        }
        assert (await harness.ledger.sessions.list(status="failed")).items == []

    async def test_list_by_id_prefix_keeps_the_ids_that_start_with_it(
        self, harness: Harness
    ) -> None:
        for id in ("adk.1", "adk.2", "adkx.3", "langgraph.1"):
            await harness.ledger.sessions.create(id)
        page = await harness.ledger.sessions.list(id_prefix="adk.")
        assert sorted(item.id for item in page.items) == ["adk.1", "adk.2"]

    async def test_list_by_external_key_finds_it_in_every_scope_and_exactly(
        self, harness: Harness
    ) -> None:
        create = harness.ledger.sessions.create
        await create("lg", app_name="langgraph", external_key="refund-order-1042")
        await create("adk", app_name="trips", user_id="ada", external_key="refund-order-1042")
        await create("other", app_name="langgraph", external_key="refund-order-10")
        await create("plain")
        page = await harness.ledger.sessions.list(
            external_key="refund-order-1042", include=["external_key"]
        )
        assert sorted(item.id for item in page.items) == ["adk", "lg"]
        assert {item.external_key for item in page.items} == {"refund-order-1042"}

    async def test_list_by_external_key_narrows_to_the_scope_given(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("lg", app_name="langgraph", external_key="k")
        await harness.ledger.sessions.create("adk", app_name="trips", external_key="k")
        page = await harness.ledger.sessions.list(external_key="k", app_name="trips")
        assert [item.id for item in page.items] == ["adk"]

    @tier("logic")
    async def test_pages_by_external_key_cover_each_keyed_session_once(
        self, harness: Harness
    ) -> None:
        for user in ("u1", "u2", "u3"):
            await harness.ledger.sessions.create(f"s-{user}", user_id=user, external_key="k")
        first = await harness.ledger.sessions.list(external_key="k", limit=2)
        assert first.next_cursor is not None
        rest = await harness.ledger.sessions.list(
            external_key="k", limit=2, cursor=first.next_cursor
        )
        seen = [item.id for item in first.items + rest.items]
        assert sorted(seen) == ["s-u1", "s-u2", "s-u3"] and rest.next_cursor is None

    @tier("logic")
    async def test_a_cursor_of_another_external_key_is_refused(self, harness: Harness) -> None:
        for user in ("u1", "u2"):
            await harness.ledger.sessions.create(f"s-{user}", user_id=user, external_key="k")
        page = await harness.ledger.sessions.list(external_key="k", limit=1)
        with pytest.raises(ValidationError):
            await harness.ledger.sessions.list(external_key="j", limit=1, cursor=page.next_cursor)
        with pytest.raises(ValidationError):
            await harness.ledger.sessions.list(limit=1, cursor=page.next_cursor)

    async def test_list_search_finds_title_or_opening_message_ignoring_case_and_literally(
        self, harness: Harness
    ) -> None:
        await harness.ledger.sessions.create("t", title="Trip to LISBON")
        await harness.ledger.sessions.create("x", title="Refund 1000 of orderX42")
        opened = await harness.ledger.sessions.create("m")
        await harness.ledger.messages.append(
            opened, NewMessage(role="user", content="Refund 100% of order_42")
        )
        search = harness.ledger.sessions.list
        assert [item.id for item in (await search(search="lisbon")).items] == ["t"]
        assert [item.id for item in (await search(search="100% of order_4")).items] == ["m"]
        assert (await search(search="100%%")).items == []  # % and _ are no wildcards
        assert [item.id for item in (await search(search="order_42")).items] == ["m"]

    async def test_pages_cover_every_session_exactly_once(self, harness: Harness) -> None:
        ids = await self._make(harness, 23)
        seen: list[str] = []
        cursor = None
        while True:
            page = await harness.ledger.sessions.list(limit=5, cursor=cursor)
            seen.extend(item.id for item in page.items)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert sorted(seen) == sorted(ids)
        assert len(seen) == len(set(seen))

    @tier("logic")
    async def test_a_tampered_cursor_is_a_validation_error(self, harness: Harness) -> None:
        await self._make(harness, 3)
        page = await harness.ledger.sessions.list(limit=1)
        assert page.next_cursor is not None
        for bad in (
            page.next_cursor[:-1] + ("0" if page.next_cursor[-1] != "0" else "1"),
            page.next_cursor[:10],
            "garbage",
            "a.b.c",
        ):
            with pytest.raises(ValidationError):
                await harness.ledger.sessions.list(limit=1, cursor=bad)

    @tier("logic")
    async def test_a_cursor_from_another_listing_is_refused(self, harness: Harness) -> None:
        await self._make(harness, 3, user_id="u")
        page = await harness.ledger.sessions.list(limit=1)
        with pytest.raises(ValidationError):
            await harness.ledger.sessions.list(limit=1, user_id="u", cursor=page.next_cursor)

    @pytest.mark.parametrize("limit", [0, -1, 1001, True])
    @tier("logic")
    async def test_a_limit_out_of_range_is_refused(self, harness: Harness, limit: int) -> None:
        with pytest.raises(ValidationError):
            await harness.ledger.sessions.list(limit=limit)

    async def test_summaries_carry_what_a_person_recognises(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("shown", title="Trip to Rome", model="m", user_id="u")
        (item,) = (await harness.ledger.sessions.list()).items
        assert (item.id, item.title, item.model, item.status, item.user_id) == (
            "shown",
            "Trip to Rome",
            "m",
            "active",
            "u",
        )
        assert item.created_at <= item.updated_at

    async def test_paging_while_sessions_are_added_covers_each_earlier_one_once(
        self, harness: Harness
    ) -> None:
        ids = await self._make(harness, 12)
        seen: list[str] = []
        cursor = None
        added = 0
        while True:
            page = await harness.ledger.sessions.list(limit=4, cursor=cursor)
            seen.extend(item.id for item in page.items)
            await harness.ledger.sessions.create(f"added-{added}")
            added += 1
            cursor = page.next_cursor
            if cursor is None:
                break
        assert sorted(i for i in seen if not i.startswith("added-")) == sorted(ids)
        assert len(seen) == len(set(seen))

    async def test_summaries_count_messages_steps_and_tokens(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create("counted")
        await harness.ledger.messages.append(record, NewMessage(role="user", content="Hello"))
        usage = TokenUsage(input_tokens=5, output_tokens=7, total_tokens=12)
        await harness.ledger.steps.append("counted", [NewStep(usage=usage), NewStep(usage=usage)])
        (item,) = (await harness.ledger.sessions.list()).items
        assert (item.title, item.message_count, item.step_count) == ("Hello", 1, 2)
        assert (item.input_tokens, item.output_tokens, item.total_tokens) == (10, 14, 24)

    async def test_most_recent_is_none_then_the_latest_updated(self, harness: Harness) -> None:
        assert await harness.ledger.sessions.most_recent() is None
        await self._make(harness, 2)
        latest = await harness.ledger.sessions.most_recent()
        assert latest is not None and latest.id == "s-1"
        assert (await harness.ledger.sessions.most_recent(user_id="nobody")) is None


class UnitOfWorkContract:
    """The unit of work: commit, rollback, rollback-only, joining a caller's transaction."""

    async def test_leaving_the_block_commits(self, harness: Harness) -> None:
        async with harness.ledger.unit_of_work() as uow:
            await uow.sessions.create("committed")
            assert await uow.sessions.exists("committed")
        assert await harness.ledger.sessions.exists("committed")

    async def test_an_exception_rolls_everything_back(self, harness: Harness) -> None:
        with pytest.raises(RuntimeError):
            async with harness.ledger.unit_of_work() as uow:
                await uow.sessions.create("rolled-1")
                await uow.sessions.create("rolled-2")
                raise RuntimeError("boom")
        assert not await harness.ledger.sessions.exists("rolled-1")
        assert not await harness.ledger.sessions.exists("rolled-2")

    async def test_after_a_conflict_the_unit_of_work_is_rollback_only(
        self, harness: Harness
    ) -> None:
        record = await harness.ledger.sessions.create("contended")
        await harness.ledger.sessions.save(record.model_copy(update={"title": "winner"}))
        async with harness.ledger.unit_of_work() as uow:
            await uow.sessions.create("side-effect")
            with pytest.raises(ConflictError):
                await uow.sessions.save(record.model_copy(update={"title": "loser"}))
            with pytest.raises(UsageError):
                await uow.sessions.create("after-conflict")
        assert not await harness.ledger.sessions.exists("side-effect")
        assert (await harness.ledger.sessions.get("contended")).title == "winner"

    async def test_a_ledger_call_inside_an_open_unit_of_work_is_refused(
        self, harness: Harness
    ) -> None:
        async with harness.ledger.unit_of_work():
            with pytest.raises(UsageError):
                await harness.ledger.sessions.create("inner")
            with pytest.raises(UsageError):
                async with harness.ledger.unit_of_work():
                    pass

    @tier("driver")
    async def test_two_readers_then_two_savers_exactly_one_conflicts(
        self, harness: Harness
    ) -> None:
        await harness.ledger.sessions.create("race", state={"by": None})
        async with harness.ledger.unit_of_work() as first:
            seen_first = await first.sessions.get("race")
        async with harness.ledger.unit_of_work() as second:
            seen_second = await second.sessions.get("race")
        async with harness.ledger.unit_of_work() as first:
            await first.sessions.save(seen_first.model_copy(update={"state": {"by": "first"}}))
        with pytest.raises(ConflictError) as raised:
            async with harness.ledger.unit_of_work() as second:
                await second.sessions.save(
                    seen_second.model_copy(update={"state": {"by": "second"}})
                )
        assert raised.value.reason == "stale"
        assert (await harness.ledger.sessions.get("race")).state == {"by": "first"}

    @tier("driver")
    async def test_concurrent_savers_of_one_revision_exactly_one_wins(
        self, harness: Harness
    ) -> None:
        record = await harness.ledger.sessions.create("duel")
        barrier = harness.barrier(2)

        async def saver(index: int) -> str:
            await barrier.wait()
            try:
                await harness.ledger.sessions.save(
                    record.model_copy(update={"state": {"by": index}})
                )
            except ConflictError as error:
                return error.reason
            return "saved"

        outcomes = sorted(await harness.concurrently(2, saver))
        assert outcomes == ["saved", "stale"]
        assert (await harness.ledger.sessions.get("duel")).revision == 2

    async def test_run_retries_a_conflict_and_returns_the_result(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create("retried")
        await harness.ledger.sessions.save(record.model_copy(update={"title": "moved on"}))
        calls = []

        async def change(uow: Any) -> int:
            calls.append(1)
            # The first attempt works from a view that is already stale.
            current = record if len(calls) == 1 else await uow.sessions.get("retried")
            saved = await uow.sessions.save(current.model_copy(update={"title": "done"}))
            return int(saved.revision)

        assert await harness.ledger.run(change) == 3
        assert len(calls) == 2
        assert (await harness.ledger.sessions.get("retried")).title == "done"

    async def test_run_gives_up_after_its_retries(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create("hopeless")
        await harness.ledger.sessions.save(record.model_copy(update={"title": "moved on"}))
        calls = []

        async def always_stale(uow: Any) -> None:
            calls.append(1)
            await uow.sessions.save(record)

        with pytest.raises(ConflictError):
            await harness.ledger.run(always_stale, retries=2)
        assert len(calls) == 3

    @tier("logic")
    async def test_run_does_not_retry_a_validation_error(self, harness: Harness) -> None:
        calls = []

        async def invalid(uow: Any) -> None:
            calls.append(1)
            await uow.sessions.create("..bad")

        with pytest.raises(InvalidIdError):
            await harness.ledger.run(invalid)
        assert len(calls) == 1

    @pytest.mark.parametrize("orm", [False, True], ids=["connection", "orm-session"])
    @tier("driver")
    async def test_a_joined_unit_of_work_commits_with_its_caller(
        self, harness: Harness, orm: bool
    ) -> None:
        async with harness.require("caller_transaction")(orm=orm) as caller:
            async with harness.ledger.unit_of_work(join=caller.join) as uow:
                await uow.sessions.create("joined")
            await caller.commit()
        assert await harness.ledger.sessions.exists("joined")

    @pytest.mark.parametrize("orm", [False, True], ids=["connection", "orm-session"])
    @tier("driver")
    async def test_a_joined_unit_of_work_whose_caller_rolls_back_leaves_nothing(
        self, harness: Harness, orm: bool
    ) -> None:
        async with harness.require("caller_transaction")(orm=orm) as caller:
            async with harness.ledger.unit_of_work(join=caller.join) as uow:
                await uow.sessions.create("joined-then-rolled-back")
            await caller.rollback()
        assert not await harness.ledger.sessions.exists("joined-then-rolled-back")

    @pytest.mark.parametrize("orm", [False, True], ids=["connection", "orm-session"])
    @tier("driver")
    async def test_a_failing_joined_unit_of_work_leaves_the_caller_usable(
        self, harness: Harness, orm: bool
    ) -> None:
        async with harness.require("caller_transaction")(orm=orm) as caller:
            async with harness.ledger.unit_of_work(join=caller.join) as uow:
                await uow.sessions.create("kept")
            with pytest.raises(RuntimeError):
                async with harness.ledger.unit_of_work(join=caller.join) as uow:
                    await uow.sessions.create("undone")
                    raise RuntimeError("boom")
            assert (await caller.execute("SELECT 1")).scalar() == 1
            await caller.commit()
        assert await harness.ledger.sessions.exists("kept")
        assert not await harness.ledger.sessions.exists("undone")


@tier("driver")
class ConcurrencyContract:
    """Many writers, one session: no update is ever lost."""

    writers = 8
    rounds = 50

    async def test_concurrent_creates_of_one_id_make_one_session(self, harness: Harness) -> None:
        barrier = harness.barrier(self.writers)

        async def creator(index: int) -> str:
            await barrier.wait()
            try:
                await harness.ledger.sessions.create("contested", state={"by": index})
            except ConflictError as error:
                return error.reason
            return "created"

        outcomes = await harness.concurrently(self.writers, creator)
        assert sorted(outcomes) == ["created"] + ["exists"] * (self.writers - 1)
        page = await harness.ledger.sessions.list()
        assert [item.id for item in page.items] == ["contested"]

    async def test_read_modify_save_rounds_lose_no_update(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("counter", state={"total": 0})
        conflicts = [0] * self.writers
        written: list[tuple[int, int]] = []  # (revision read, revision written) per commit

        async def writer(index: int) -> None:
            for _ in range(self.rounds):
                while True:
                    record = await harness.ledger.sessions.get("counter")
                    state = dict(record.state)
                    state["total"] += 1
                    state[f"w{index}"] = state.get(f"w{index}", 0) + 1
                    try:
                        saved = await harness.ledger.sessions.save(
                            record.model_copy(update={"state": state})
                        )
                    except ConflictError as error:  # every failed attempt is a conflict
                        assert error.reason == "stale"
                        conflicts[index] += 1
                        continue
                    written.append((record.revision, saved.revision))
                    break

        await harness.concurrently(self.writers, writer)
        final = await harness.ledger.sessions.get("counter")
        commits = self.writers * self.rounds
        assert final.state["total"] == commits
        assert all(final.state[f"w{i}"] == self.rounds for i in range(self.writers))
        assert final.revision == 1 + commits
        # The history is linear: each revision was read by exactly one committed writer
        # and written exactly once, with no gap.
        assert sorted(read for read, _ in written) == list(range(1, commits + 1))
        assert sorted(new for _, new in written) == list(range(2, commits + 2))
        assert all(new == read + 1 for read, new in written)
        assert sum(conflicts) > 0, "no contention was produced; the test proved nothing"


__all__ = [
    "ConcurrencyContract",
    "ListingContract",
    "SessionContract",
    "UnitOfWorkContract",
]
