"""Contract: steps, token usage, run summaries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agentledger import NewStep, NotFoundError, RunSummary, TokenUsage, ValidationError

from .harness import Harness, tier


def model_step(index: int, *, tokens: int = 10, model: str = "m1", **fields: Any) -> NewStep:
    """A model call at ``step_index`` using ``tokens`` input and half as many output tokens."""
    usage = TokenUsage(
        input_tokens=tokens, output_tokens=tokens // 2, total_tokens=tokens + tokens // 2
    )
    return NewStep(step_index=index, kind="model", model=model, usage=usage, **fields)


class StepContract:
    """Recording and reading the trace of a session's runs."""

    async def test_append_gives_seqs_from_1_in_order(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("trace")
        first = await harness.ledger.steps.append("trace", model_step(0))
        batch = await harness.ledger.steps.append("trace", [model_step(1), model_step(2)])
        assert [s.seq for s in first + batch] == [1, 2, 3]
        assert [s.seq for s in await harness.ledger.steps.last("trace", 10)] == [1, 2, 3]

    async def test_a_step_round_trips_every_field(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("full")
        started = datetime(2026, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
        step = NewStep(
            step_index=7,
            kind="tool",
            run_id="run-1",
            name="search",
            model="m",
            input={"query": "museums", "n": 2**63 - 1},
            output=["result", {"score": -0.0}],
            tool_calls=[{"id": "call-1", "name": "search", "arguments": {"q": "x"}}],
            usage=TokenUsage(input_tokens=3, output_tokens=4, total_tokens=9, extra={"cached": 2}),
            started_at=started,
            ended_at=started + timedelta(milliseconds=1500),
            error="timeout after 1.5 s",
        )
        (stored,) = await harness.ledger.steps.append("full", step)
        (read,) = await harness.ledger.steps.last("full", 1)
        assert read == stored
        assert read.model_dump(exclude={"session_id", "seq"}) == step.model_dump()

    async def test_step_index_is_stored_as_recorded_and_may_repeat(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("loop")
        await harness.ledger.steps.append("loop", [model_step(i) for i in (0, 1, 2, 0, 1)])
        last = await harness.ledger.steps.last("loop", 3)
        assert [(s.seq, s.step_index) for s in last] == [(3, 2), (4, 0), (5, 1)]

    async def test_appending_updates_the_session_counters_and_totals(
        self, harness: Harness
    ) -> None:
        before = await harness.ledger.sessions.create("totals")
        await harness.ledger.steps.append("totals", [model_step(0, tokens=10), model_step(1)])
        after = await harness.ledger.sessions.get("totals")
        assert (after.step_count, after.input_tokens, after.output_tokens, after.total_tokens) == (
            2,
            20,
            10,
            30,
        )
        assert after.revision == before.revision
        assert after.updated_at >= before.updated_at
        assert await harness.ledger.steps.count("totals") == 2

    async def test_a_step_append_does_not_make_a_held_record_stale(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create("no-conflict")
        await harness.ledger.steps.append("no-conflict", model_step(0))
        saved = await harness.ledger.sessions.save(record.model_copy(update={"state": {"x": 1}}))
        assert (saved.state, saved.step_count, saved.total_tokens) == ({"x": 1}, 1, 15)

    async def test_appending_to_an_unknown_session_is_not_found_and_stores_nothing(
        self, harness: Harness
    ) -> None:
        with pytest.raises(NotFoundError):
            await harness.ledger.steps.append("nobody", model_step(0))
        assert not await harness.ledger.sessions.exists("nobody")
        assert (await harness.ledger.steps.usage()).total_tokens == 0

    async def test_appending_to_a_deleted_session_is_not_found(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("late")
        await harness.ledger.sessions.delete("late")
        with pytest.raises(NotFoundError):
            await harness.ledger.steps.append("late", model_step(0))
        assert not await harness.ledger.sessions.exists("late")

    @pytest.mark.parametrize(
        ("step", "path"),
        [
            ({"input": {"x": float("inf")}}, "steps[1].input['x']"),
            ({"output": "nul\x00"}, "steps[1].output"),
            ({"tool_calls": [{1, 2}]}, "steps[1].tool_calls[0]"),
            ({"started_at": datetime(2026, 1, 1)}, "steps[1]"),
            ({"usage": {"input_tokens": -1}}, "steps[1]"),
            ({"kind": ""}, "steps[1]"),
        ],
        ids=["inf", "nul", "set", "naive-time", "negative-tokens", "empty-kind"],
    )
    @tier("logic")
    async def test_an_invalid_step_is_refused_by_its_path_and_none_is_stored(
        self, harness: Harness, step: dict[str, Any], path: str
    ) -> None:
        await harness.ledger.sessions.create("strict")
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.steps.append("strict", [model_step(0), step])
        assert path in str(raised.value)
        assert await harness.ledger.steps.count("strict") == 0

    async def test_last_n_is_chronological(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("recent")
        await harness.ledger.steps.append("recent", [model_step(i) for i in range(10)])
        assert [s.seq for s in await harness.ledger.steps.last("recent", 4)] == [7, 8, 9, 10]

    async def test_iterate_streams_every_step_in_order(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("stream")
        await harness.ledger.steps.append("stream", [model_step(i) for i in range(25)])
        seen = [step.seq async for step in harness.ledger.steps.iterate("stream", batch=7)]
        assert seen == list(range(1, 26))

    async def test_reading_steps_of_an_unknown_session_is_not_found(self, harness: Harness) -> None:
        with pytest.raises(NotFoundError):
            await harness.ledger.steps.last("nobody", 5)
        with pytest.raises(NotFoundError):
            await harness.ledger.steps.count("nobody")


class UsageContract:
    """Token totals over the steps a filter selects."""

    async def _seed(self, harness: Harness) -> datetime:
        start = datetime(2026, 3, 1, tzinfo=UTC)
        await harness.ledger.sessions.create("a", user_id="ada")
        await harness.ledger.sessions.create("b", user_id="bob")
        await harness.ledger.steps.append(
            "a",
            [
                model_step(0, tokens=10, model="big", started_at=start),
                model_step(1, tokens=20, model="small", started_at=start + timedelta(days=1)),
            ],
        )
        await harness.ledger.steps.append(
            "b", model_step(0, tokens=40, model="big", started_at=start + timedelta(days=2))
        )
        return start

    async def test_usage_totals_everything_without_filters(self, harness: Harness) -> None:
        await self._seed(harness)
        total = await harness.ledger.steps.usage()
        assert (total.input_tokens, total.output_tokens, total.total_tokens) == (70, 35, 105)

    async def test_usage_filters_combine(self, harness: Harness) -> None:
        start = await self._seed(harness)
        usage = harness.ledger.steps.usage
        assert (await usage(session_id="a")).input_tokens == 30
        assert (await usage(user_id="bob")).input_tokens == 40
        assert (await usage(model="big")).input_tokens == 50
        assert (await usage(model="big", user_id="ada")).input_tokens == 10
        assert (await usage(since=start + timedelta(days=1))).input_tokens == 60
        assert (await usage(until=start + timedelta(days=1))).input_tokens == 10
        assert (await usage(user_id="nobody")).total_tokens == 0

    @tier("logic")
    async def test_a_naive_bound_is_refused(self, harness: Harness) -> None:
        with pytest.raises(ValidationError):
            await harness.ledger.steps.usage(since=datetime(2026, 1, 1))

    async def test_usage_by_groups_the_period_per_day_model_and_user(
        self, harness: Harness
    ) -> None:
        start = await self._seed(harness)
        period = {"since": start, "until": start + timedelta(days=2)}
        by = harness.ledger.steps.usage_by
        days = await by("day", **period)
        assert [(g.key, g.steps, g.usage.total_tokens) for g in days] == [
            ("2026-03-01", 1, 15),
            ("2026-03-02", 1, 30),
        ]
        everything = {"since": start, "until": start + timedelta(days=3)}
        models = await by("model", **everything)
        assert [(g.key, g.usage.input_tokens) for g in models] == [("big", 50), ("small", 20)]
        users = await by("user", **everything)
        assert [(g.key, g.usage.input_tokens) for g in users] == [("bob", 40), ("ada", 30)]
        assert [g.key for g in await by("model", user_id="ada", **everything)] == ["small", "big"]

    async def test_usage_by_without_bounds_groups_every_step(self, harness: Harness) -> None:
        start = await self._seed(harness)
        everything = {"since": start, "until": start + timedelta(days=3)}
        by = harness.ledger.steps.usage_by
        assert await by("model") == await by("model", **everything)
        assert await by("day", since=start + timedelta(days=1)) == await by(
            "day", since=start + timedelta(days=1), until=start + timedelta(days=3)
        )
        assert [g.key for g in await by("day", until=start + timedelta(days=1))] == ["2026-03-01"]

    @tier("logic")
    async def test_usage_by_an_unknown_grouping_is_refused(self, harness: Harness) -> None:
        now = datetime(2026, 3, 1, tzinfo=UTC)
        with pytest.raises(ValidationError, match="by must be one of"):
            await harness.ledger.steps.usage_by("week", since=now, until=now)


class FinalizeContract:
    """Run summaries recorded on the session."""

    async def test_finalize_records_status_and_last_run(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create("run")
        ended = datetime(2026, 4, 1, 9, 30, tzinfo=UTC)
        summary = RunSummary(
            status="failed",
            model="m",
            usage=TokenUsage(input_tokens=1, output_tokens=2, total_tokens=3),
            error="tool crashed",
            ended_at=ended,
        )
        after = await harness.ledger.sessions.finalize("run", summary)
        assert after.status == "failed"
        assert after.last_run == summary
        assert after.revision == record.revision
        assert (await harness.ledger.sessions.get("run")).last_run == summary

    async def test_finalize_overwrites_the_previous_run(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("twice")
        await harness.ledger.sessions.finalize("twice", RunSummary(status="failed"))
        after = await harness.ledger.sessions.finalize("twice", {"status": "completed"})
        assert after.status == "completed"
        assert after.last_run is not None and after.last_run.error is None
        assert after.last_run.ended_at is not None

    async def test_finalize_and_save_never_undo_each_other(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create("both", title="old")
        await harness.ledger.sessions.finalize("both", RunSummary(status="interrupted"))
        saved = await harness.ledger.sessions.save(record.model_copy(update={"title": "new"}))
        assert (saved.status, saved.title) == ("interrupted", "new")

    async def test_finalizing_an_unknown_or_deleted_session_is_not_found(
        self, harness: Harness
    ) -> None:
        with pytest.raises(NotFoundError):
            await harness.ledger.sessions.finalize("nobody", RunSummary(status="completed"))
        await harness.ledger.sessions.create("gone")
        await harness.ledger.sessions.delete("gone")
        with pytest.raises(NotFoundError):
            await harness.ledger.sessions.finalize("gone", RunSummary(status="completed"))
        assert not await harness.ledger.sessions.exists("gone")

    @tier("logic")
    async def test_an_unknown_status_is_refused(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("odd")
        with pytest.raises(ValidationError):
            await harness.ledger.sessions.finalize("odd", {"status": "exploded"})

    async def test_listings_filter_by_the_finalized_status(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("done")
        await harness.ledger.sessions.create("open")
        await harness.ledger.sessions.finalize("done", RunSummary(status="completed"))
        page = await harness.ledger.sessions.list(status="completed")
        assert [item.id for item in page.items] == ["done"]
        assert [i.id for i in (await harness.ledger.sessions.list(status="active")).items] == [
            "open"
        ]


@tier("driver")
class StepConcurrencyContract:
    """Concurrent appenders of steps never conflict and never lose a token."""

    async def test_four_appenders_and_a_saver_lose_nothing(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create("hot", state={"saved": False})
        writers, per_writer = 4, 100
        barrier = harness.barrier(writers + 1)

        async def worker(index: int) -> None:
            await barrier.wait()
            if index == writers:  # the fifth task saves the state meanwhile
                await harness.ledger.sessions.save(
                    record.model_copy(update={"state": {"saved": True}})
                )
                return
            for turn in range(per_writer):
                await harness.ledger.steps.append("hot", model_step(turn, tokens=1 + index))

        await harness.concurrently(writers + 1, worker)
        final = await harness.ledger.sessions.get("hot")
        steps = [step async for step in harness.ledger.steps.iterate("hot", batch=150)]
        assert [s.seq for s in steps] == list(range(1, writers * per_writer + 1))
        assert final.step_count == writers * per_writer
        assert final.input_tokens == sum((1 + i) * per_writer for i in range(writers))
        assert final.state == {"saved": True}
        assert final.revision == record.revision + 1


__all__ = [
    "FinalizeContract",
    "StepConcurrencyContract",
    "StepContract",
    "UsageContract",
]
