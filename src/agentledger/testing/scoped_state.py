"""Contract: app state and user state, shared beyond one session."""

from __future__ import annotations

from typing import Any

import pytest

from agentledger import ConflictError, StateDelta, ValidationError

from .harness import Harness, tier


class ScopedStateContract:
    """Reading, replacing, merging and deleting app and user state."""

    async def test_a_scope_nothing_was_stored_for_reads_empty_at_revision_0(
        self, harness: Harness
    ) -> None:
        app = await harness.ledger.app_state.get("fresh app")
        user = await harness.ledger.user_state.get("fresh app", "ana@example.com")
        assert (app.state, app.revision, app.created_at) == ({}, 0, None)
        assert (user.app_name, user.user_id, user.state, user.revision) == (
            "fresh app",
            "ana@example.com",
            {},
            0,
        )

    async def test_a_merge_sets_and_deletes_keys_and_bumps_the_revision(
        self, harness: Harness
    ) -> None:
        state = harness.ledger.app_state
        await state.merge("app", StateDelta(set={"theme": "dark", "beta": True}))
        merged = await state.merge("app", {"set": {"lang": "pt"}, "delete": ["beta"]})
        assert (merged.state, merged.revision) == ({"theme": "dark", "lang": "pt"}, 2)
        assert await state.get("app") == merged

    async def test_an_empty_delta_changes_nothing(self, harness: Harness) -> None:
        await harness.ledger.app_state.merge("app", {"set": {"a": 1}})
        same = await harness.ledger.app_state.merge("app", StateDelta())
        assert (same.state, same.revision) == ({"a": 1}, 1)

    async def test_save_replaces_the_state_at_the_read_revision(self, harness: Harness) -> None:
        state = harness.ledger.user_state
        read = await state.get("app", "ana")
        saved = await state.save(read.model_copy(update={"state": {"plan": [1, 2]}}))
        again = await state.save(saved.model_copy(update={"state": {"plan": []}}))
        assert (saved.revision, again.revision, again.state) == (1, 2, {"plan": []})

    async def test_saving_from_a_stale_read_is_a_conflict_stale(self, harness: Harness) -> None:
        state = harness.ledger.app_state
        read = await state.get("app")
        await state.merge("app", {"set": {"winner": 1}})
        with pytest.raises(ConflictError) as raised:
            await state.save(read.model_copy(update={"state": {"loser": 1}}))
        assert raised.value.reason == "stale"
        assert (await state.get("app")).state == {"winner": 1}

    async def test_two_first_saves_exactly_one_wins(self, harness: Harness) -> None:
        state = harness.ledger.app_state
        read = await state.get("new-app")
        await state.save(read.model_copy(update={"state": {"by": "first"}}))
        with pytest.raises(ConflictError):
            await state.save(read.model_copy(update={"state": {"by": "second"}}))

    async def test_app_and_user_state_are_separate_scopes(self, harness: Harness) -> None:
        ledger = harness.ledger
        await ledger.app_state.merge("app", {"set": {"k": "app"}})
        await ledger.user_state.merge("app", "ana", {"set": {"k": "ana"}})
        await ledger.user_state.merge("app", "bob", {"set": {"k": "bob"}})
        await ledger.user_state.merge("other app", "ana", {"set": {"k": "other"}})
        assert (await ledger.app_state.get("app")).state == {"k": "app"}
        assert (await ledger.user_state.get("app", "ana")).state == {"k": "ana"}
        assert (await ledger.user_state.get("other app", "ana")).state == {"k": "other"}

    async def test_deleting_a_session_leaves_its_app_and_user_state(self, harness: Harness) -> None:
        ledger = harness.ledger
        await ledger.sessions.create("s", app_name="app", user_id="ana")
        await ledger.app_state.merge("app", {"set": {"k": 1}})
        await ledger.user_state.merge("app", "ana", {"set": {"k": 2}})
        await ledger.sessions.delete("s")
        assert (await ledger.app_state.get("app")).state == {"k": 1}
        assert (await ledger.user_state.get("app", "ana")).state == {"k": 2}

    async def test_delete_removes_the_state_and_says_whether_there_was_any(
        self, harness: Harness
    ) -> None:
        ledger = harness.ledger
        await ledger.user_state.merge("app", "ana", {"set": {"k": 1}})
        assert await ledger.user_state.delete("app", "ana") is True
        assert await ledger.user_state.delete("app", "ana") is False
        assert (await ledger.user_state.get("app", "ana")).revision == 0
        assert await ledger.app_state.delete("app") is False

    async def test_merges_in_a_unit_of_work_commit_with_it(self, harness: Harness) -> None:
        with pytest.raises(RuntimeError):
            async with harness.ledger.unit_of_work() as uow:
                await uow.app_state.merge("app", {"set": {"lost": 1}})
                raise RuntimeError("boom")
        assert (await harness.ledger.app_state.get("app")).revision == 0
        async with harness.ledger.unit_of_work() as uow:
            await uow.app_state.merge("app", {"set": {"a": 1}})
            merged = await uow.app_state.merge("app", {"set": {"b": 2}})
            assert await uow.app_state.get("app") == merged
        assert (await harness.ledger.app_state.get("app")).state == {"a": 1, "b": 2}

    @pytest.mark.parametrize(
        ("delta", "path"),
        [
            ({"set": {"x": float("nan")}}, "delta.set['x']"),
            ({"set": {"x": (1, 2)}}, "delta.set['x']"),
            ({"set": ["not", "an", "object"]}, "delta"),
            ({"theme": "dark"}, "delta"),
            (["set", "x"], "delta"),
            ({"set": {"x": 1}, "delete": ["x"]}, "delta.delete"),
            ({"delete": ["a\x00"]}, "delta.delete"),
        ],
        ids=["nan", "tuple", "set-not-object", "bare-dict", "list", "set-and-delete", "nul-key"],
    )
    @tier("logic")
    async def test_a_bad_delta_is_refused_naming_the_field(
        self, harness: Harness, delta: Any, path: str
    ) -> None:
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.app_state.merge("app", delta)
        assert raised.value.path == path
        assert (await harness.ledger.app_state.get("app")).revision == 0

    @pytest.mark.parametrize(
        ("scope", "path"),
        [
            (("", "ana"), "app_name"),
            (("app", None), "user_id"),
            (("a" * 256, "ana"), "app_name"),
            (("app", "u\x00"), "user_id"),
        ],
        ids=["empty-app", "no-user", "long-app", "nul-user"],
    )
    @tier("logic")
    async def test_a_missing_or_bad_scope_is_refused_naming_it(
        self, harness: Harness, scope: tuple[Any, Any], path: str
    ) -> None:
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.user_state.get(*scope)
        assert raised.value.path == path
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.user_state.merge(*scope, {"set": {"k": 1}})
        assert raised.value.path == path

    @tier("logic")
    async def test_app_state_needs_an_app_name(self, harness: Harness) -> None:
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.app_state.merge(None, {"set": {"k": 1}})
        assert raised.value.path == "app_name"

    @tier("logic")
    async def test_save_refuses_state_that_is_not_json(self, harness: Harness) -> None:
        read = await harness.ledger.app_state.get("app")
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.app_state.save(read.model_copy(update={"state": {"s": {1, 2}}}))
        assert raised.value.path == "state['s']"


@tier("driver")
class ScopedStateConcurrencyContract:
    """Concurrent writers of one scope's state."""

    async def test_8_concurrent_delta_merges_of_app_state_lose_nothing(
        self, harness: Harness
    ) -> None:
        writers, rounds = 8, 10
        barrier = harness.barrier(writers)

        async def writer(index: int) -> None:
            await barrier.wait()  # the first merges race to create the row
            for turn in range(rounds):
                await harness.ledger.app_state.merge("shared", {"set": {f"{index}:{turn}": turn}})

        await harness.concurrently(writers, writer)
        final = await harness.ledger.app_state.get("shared")
        assert final.revision == writers * rounds
        assert final.state == {f"{i}:{t}": t for i in range(writers) for t in range(rounds)}

    async def test_concurrent_merges_of_user_state_lose_nothing(self, harness: Harness) -> None:
        barrier = harness.barrier(8)

        async def writer(index: int) -> None:
            await barrier.wait()
            await harness.ledger.user_state.merge("app", "ana", {"set": {str(index): index}})

        await harness.concurrently(8, writer)
        final = await harness.ledger.user_state.get("app", "ana")
        assert (final.revision, final.state) == (8, {str(i): i for i in range(8)})

    async def test_concurrent_appends_with_app_and_user_deltas_lose_nothing(
        self, harness: Harness
    ) -> None:
        # Each writer appends to its own session; every append merges into the one app
        # state and into one of two users' state, racing the first merges (the rows are
        # created by them) and direct merges of the same scopes.
        writers, rounds = 6, 5
        ledger = harness.ledger
        records = [
            await ledger.sessions.create(f"scoped-{i}", app_name="shared", user_id=f"u{i % 2}")
            for i in range(writers)
        ]
        barrier = harness.barrier(writers + 1)

        async def writer(index: int) -> None:
            await barrier.wait()
            if index == writers:
                for turn in range(rounds):
                    await ledger.app_state.merge("shared", {"set": {f"merge:{turn}": turn}})
                    await ledger.user_state.merge("shared", "u0", {"set": {f"merge:{turn}": turn}})
                return
            record = records[index]
            for turn in range(rounds):
                key = f"{index}:{turn}"
                done = await ledger.messages.append(
                    record,
                    {"role": "tool", "content": key, "external_key": key},
                    state_delta={"set": {"turn": turn}},
                    app_state_delta={"set": {key: turn}},
                    user_state_delta={"set": {key: turn}, "delete": [f"{index}:{turn - 1}"]},
                )
                assert done.session.revision == record.revision + 1
                record = done.session

        await harness.concurrently(writers + 1, writer)
        app = await ledger.app_state.get("shared")
        expected = {f"{i}:{t}": t for i in range(writers) for t in range(rounds)}
        merged = {f"merge:{t}": t for t in range(rounds)}
        assert (app.revision, app.state) == (writers * rounds + rounds, expected | merged)
        last = rounds - 1
        for user in (0, 1):
            state = (await ledger.user_state.get("shared", f"u{user}")).state
            mine = {f"{i}:{last}": last for i in range(user, writers, 2)}
            assert state == (mine | merged if user == 0 else mine)
        for i in range(writers):
            assert (await ledger.sessions.get(f"scoped-{i}")).state == {"turn": last}
            assert len(await ledger.messages.all(f"scoped-{i}")) == rounds
