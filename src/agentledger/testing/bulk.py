"""Contract: the bulk forms maintenance runs on (retention rules, ``sessions show``).

Each is a repository operation like any other, so a store passes these through the
same public API the rest of the suite uses.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentledger import (
    CheckpointPayload,
    NewStep,
    NotFoundError,
    SessionSelection,
    ValidationError,
)

from .harness import Harness, tier

EMPTY = CheckpointPayload()
FAR_PAST = datetime(2000, 1, 1, tzinfo=UTC)


class BulkContract:
    """Overview, stale sessions, and checkpoint pruning and expiry over many sessions."""

    async def test_overview_reads_a_session_with_the_newest_of_its_parts(
        self, harness: Harness
    ) -> None:
        ledger = harness.ledger
        record = await ledger.sessions.create("s-1", title="one")
        await ledger.messages.append(
            record, [{"role": "user", "content": f"m{i}"} for i in range(5)]
        )
        await ledger.steps.append("s-1", [NewStep(kind="model") for _ in range(3)])
        await ledger.grants.grant("s-1", "shell")
        await ledger.checkpoints.save("s-1", EMPTY)
        view = await ledger.sessions.overview("s-1", messages=2, steps=1, checkpoints=5)
        assert [m.content for m in view.messages] == ["m3", "m4"]
        assert [s.seq for s in view.steps] == [3]
        assert [g.capability for g in view.grants] == ["shell"]
        assert len(view.checkpoints) == 1 and view.session.id == "s-1"

    async def test_overview_of_an_unknown_session_is_not_found(self, harness: Harness) -> None:
        with pytest.raises(NotFoundError):
            await harness.ledger.sessions.overview("nobody")

    @tier("logic")
    async def test_overview_refuses_a_count_out_of_range(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("s-1")
        with pytest.raises(ValidationError, match="messages"):
            await harness.ledger.sessions.overview("s-1", messages=-1)

    async def test_stale_lists_sessions_updated_before_a_cutoff_oldest_first_in_pages(
        self, harness: Harness
    ) -> None:
        ledger = harness.ledger
        for name in ("a", "b", "c"):
            await ledger.sessions.create(name)
        cutoff = datetime.now(UTC) + timedelta(days=1)
        selection = SessionSelection(updated_before=cutoff)
        first = await ledger.sessions.stale(selection, limit=2)
        rest = await ledger.sessions.stale(
            selection, after=(first[-1].updated_at, first[-1].id), limit=2
        )
        assert sorted(s.id for s in first + rest) == ["a", "b", "c"]
        assert [s.updated_at for s in first] == sorted(s.updated_at for s in first)
        assert await ledger.sessions.stale(SessionSelection(updated_before=FAR_PAST)) == []

    async def test_delete_stale_deletes_only_sessions_still_not_updated(
        self, harness: Harness
    ) -> None:
        ledger = harness.ledger
        old = await ledger.sessions.create("old")
        await ledger.sessions.create("other")
        cutoff = datetime.now(UTC) + timedelta(seconds=1)
        gone = await ledger.sessions.delete_stale(["old", "missing"], updated_before=FAR_PAST)
        assert gone == [] and await ledger.sessions.exists("old")
        gone = await ledger.sessions.delete_stale(["old", "missing"], updated_before=cutoff)
        assert gone == [old.id]
        assert not await ledger.sessions.exists("old") and await ledger.sessions.exists("other")

    async def test_with_checkpoints_lists_only_sessions_that_had_one(
        self, harness: Harness
    ) -> None:
        ledger = harness.ledger
        for name in ("a", "b", "c"):
            await ledger.sessions.create(name)
        await ledger.checkpoints.save("b", EMPTY)
        await ledger.checkpoints.save("b", EMPTY)
        assert await ledger.sessions.with_checkpoints(SessionSelection()) == [("b", 2)]
        assert await ledger.sessions.with_checkpoints(SessionSelection(), after="b") == []

    async def test_prunable_lists_what_prune_would_delete_and_changes_nothing(
        self, harness: Harness
    ) -> None:
        ledger = harness.ledger
        for name in ("a", "b"):
            await ledger.sessions.create(name)
            for _ in range(3):
                await ledger.checkpoints.save(name, EMPTY)
        planned = await ledger.checkpoints.prunable(["a", "b"], 1)
        assert sorted((c.session_id, c.seq) for c in planned) == [
            ("a", 1), ("a", 2), ("b", 1), ("b", 2)
        ]  # fmt: skip
        assert len((await ledger.checkpoints.list("a")).items) == 3

    async def test_prune_sessions_deletes_what_prunable_listed_and_repoints(
        self, harness: Harness
    ) -> None:
        ledger = harness.ledger
        for name in ("a", "b"):
            await ledger.sessions.create(name)
            for _ in range(3):
                await ledger.checkpoints.save(name, EMPTY)
        planned = await ledger.checkpoints.prunable(["a", "b"], 1)
        gone = await ledger.checkpoints.prune_sessions(["a", "b", "missing"], 1)
        assert sorted(c.ref for c in gone) == sorted(c.ref for c in planned)
        latest = await ledger.checkpoints.latest("a")
        assert latest is not None and latest.seq == 3
        assert [c.seq for c in (await ledger.checkpoints.list("b")).items] == [3]

    async def test_expired_and_delete_expired_work_through_the_selection(
        self, harness: Harness
    ) -> None:
        ledger = harness.ledger
        await ledger.sessions.create("a", app_name="app-1")
        await ledger.sessions.create("b", app_name="app-2")
        for name in ("a", "b"):
            await ledger.checkpoints.save(name, EMPTY, ttl=timedelta(seconds=1))
        later = datetime.now(UTC) + timedelta(minutes=1)
        mine = SessionSelection(app_name="app-1")
        found = await ledger.checkpoints.expired(mine, at=later)
        assert [c.session_id for c in found] == ["a"]
        assert await ledger.checkpoints.expired(mine) == []  # not yet expired now
        gone = await ledger.checkpoints.delete_expired([c.ref for c in found], at=later)
        assert [c.ref for c in gone] == [c.ref for c in found]
        assert await ledger.checkpoints.latest("a") is None
        assert len(await ledger.checkpoints.expired(SessionSelection(), at=later)) == 1
