"""Contract: what frameworks do to a conversation beyond appending. Pop the newest
messages, give messages their own times and read by time, change state with an
append in one revision step, and find steps by run and by kind."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from agentledger import (
    ConflictError,
    NewMessage,
    NewStep,
    NotFoundError,
    StateDelta,
    ValidationError,
)

from .harness import Harness, tier

T0 = datetime(2026, 5, 1, 9, 0, 0, 250000, tzinfo=UTC)


def at(seconds: float, text: str | None = None) -> NewMessage:
    """A message the caller timed ``seconds`` after T0."""
    return NewMessage(
        role="user", content=text or f"t+{seconds}", created_at=T0 + timedelta(seconds=seconds)
    )


class AppendResultContract:
    """What an append returns: the stored messages with their seqs, and the session."""

    async def test_append_returns_the_messages_with_their_seqs(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create("seqs")
        first = await harness.ledger.messages.append(record, [at(0), at(1)])
        second = await harness.ledger.messages.append("seqs", at(2))
        assert [m.seq for m in first.messages] == [1, 2]
        assert [m.seq for m in second.messages] == [3]
        assert second.session.revision == record.revision + 2
        assert await harness.ledger.messages.all("seqs") == [*first.messages, *second.messages]

    async def test_a_caller_given_time_is_kept_and_seqs_still_order(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("timed")
        plus_2 = timezone(timedelta(hours=2))
        late = NewMessage(
            role="user", content="late", created_at=datetime(2030, 1, 1, tzinfo=plus_2)
        )
        await harness.ledger.messages.append("timed", [late, at(0)])
        stored = await harness.ledger.messages.all("timed")
        assert [m.content for m in stored] == ["late", "t+0"]
        assert stored[0].created_at == datetime(2029, 12, 31, 22, 0, tzinfo=UTC)
        assert stored[0].created_at.tzinfo == UTC

    async def test_a_role_of_255_characters_is_stored(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("roles")
        role = "research_assistant_agent." + "x" * 230
        done = await harness.ledger.messages.append("roles", {"role": role, "content": "hi"})
        assert done.messages[0].role == role
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.messages.append("roles", {"role": role + "y", "content": "hi"})
        assert raised.value.path == "messages[0].role"

    @pytest.mark.parametrize(
        "message",
        [
            NewMessage(role="user", content="x", created_at=datetime(2026, 1, 1)),
            {"role": "user", "content": "x", "created_at": datetime(2026, 1, 1)},
        ],
        ids=["record", "dict"],
    )
    @tier("logic")
    async def test_a_naive_created_at_is_refused_naming_it(
        self, harness: Harness, message: Any
    ) -> None:
        record = await harness.ledger.sessions.create("naive")
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.messages.append(record, [at(0), message])
        assert raised.value.path == "messages[1].created_at"
        assert await harness.ledger.messages.all("naive") == []


class PopContract:
    """Removing the newest messages (OpenAI's pop_item)."""

    async def test_pop_removes_and_returns_the_newest(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create("pop")
        after = await harness.ledger.messages.append(record, [at(0), at(1), at(2)])
        popped = await harness.ledger.messages.pop(after.session)
        assert [m.seq for m in popped.messages] == [3]
        assert popped.messages == after.messages[2:]
        assert (popped.session.message_count, popped.session.revision) == (
            2,
            after.session.revision + 1,
        )
        assert [m.seq for m in await harness.ledger.messages.all("pop")] == [1, 2]

    async def test_pop_n_returns_them_in_seq_order(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("pop-n")
        await harness.ledger.messages.append("pop-n", [at(i) for i in range(5)])
        popped = await harness.ledger.messages.pop("pop-n", 2)
        assert [m.seq for m in popped.messages] == [4, 5]
        everything = await harness.ledger.messages.pop("pop-n", 10)
        assert [m.seq for m in everything.messages] == [1, 2, 3]
        assert everything.session.message_count == 0

    async def test_popped_seqs_are_never_issued_again(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("pop-seq")
        await harness.ledger.messages.append("pop-seq", [at(0), at(1)])
        await harness.ledger.messages.pop("pop-seq")
        again = await harness.ledger.messages.append("pop-seq", at(2))
        assert [m.seq for m in again.messages] == [3]

    async def test_pop_on_an_empty_conversation_returns_nothing(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create("empty")
        popped = await harness.ledger.messages.pop(record)
        assert popped.messages == []
        assert popped.session == record
        assert (await harness.ledger.messages.pop("empty", 3)).messages == []

    async def test_pop_from_a_stale_record_conflicts_and_removes_nothing(
        self, harness: Harness
    ) -> None:
        record = await harness.ledger.sessions.create("stale-pop")
        await harness.ledger.messages.append(record, at(0))
        with pytest.raises(ConflictError) as raised:
            await harness.ledger.messages.pop(record)
        assert raised.value.reason == "stale"
        assert len(await harness.ledger.messages.all("stale-pop")) == 1

    async def test_pop_on_an_unknown_session_is_not_found(self, harness: Harness) -> None:
        with pytest.raises(NotFoundError):
            await harness.ledger.messages.pop("nobody")

    @pytest.mark.parametrize("n", [0, -1, True, 1.0], ids=["zero", "negative", "bool", "float"])
    @tier("logic")
    async def test_a_bad_count_is_refused_naming_n(self, harness: Harness, n: Any) -> None:
        await harness.ledger.sessions.create("count")
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.messages.pop("count", n)
        assert raised.value.path == "n"


class MessageTimeContract:
    """Reading a conversation by the messages' times (ADK's after_timestamp)."""

    async def test_since_is_inclusive_and_before_is_exclusive(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("clock")
        await harness.ledger.messages.append("clock", [at(i) for i in range(5)])
        since = await harness.ledger.messages.since("clock", T0 + timedelta(seconds=2))
        before = await harness.ledger.messages.before("clock", T0 + timedelta(seconds=2))
        assert [m.seq for m in since] == [3, 4, 5]
        assert [m.seq for m in before] == [1, 2]

    async def test_the_last_n_of_either_window(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("last-n")
        await harness.ledger.messages.append("last-n", [at(i) for i in range(6)])
        since = await harness.ledger.messages.since("last-n", T0 + timedelta(seconds=1), last=2)
        before = await harness.ledger.messages.before("last-n", T0 + timedelta(seconds=4), last=3)
        assert [m.seq for m in since] == [5, 6]
        assert [m.seq for m in before] == [2, 3, 4]

    async def test_a_time_window_with_ties_orders_by_seq(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("ties")
        await harness.ledger.messages.append("ties", [at(1, "a"), at(1, "b")])
        await harness.ledger.messages.append("ties", [at(1, "c"), at(0, "earlier"), at(1, "d")])
        since = await harness.ledger.messages.since("ties", T0 + timedelta(seconds=1))
        assert [m.content for m in since] == ["a", "b", "c", "d"]
        newest = await harness.ledger.messages.since("ties", T0, last=2)
        assert [m.content for m in newest] == ["c", "d"]

    async def test_time_windows_of_an_empty_or_unknown_session(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("silent")
        assert await harness.ledger.messages.since("silent", T0) == []
        with pytest.raises(NotFoundError):
            await harness.ledger.messages.before("nobody", T0)

    @tier("logic")
    async def test_a_naive_instant_is_refused_naming_it(self, harness: Harness) -> None:
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.messages.since("any", datetime(2026, 1, 1))
        assert raised.value.path == "at"
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.messages.before("any", T0, last=0)
        assert raised.value.path == "last"

    async def test_last_has_no_cap_at_ten_thousand(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("big")
        for start in range(0, 10_050, 2_010):
            await harness.ledger.messages.append(
                "big", [at(i) for i in range(start, start + 2_010)]
            )
        last = await harness.ledger.messages.last("big", 10_020)
        assert [last[0].seq, last[-1].seq, len(last)] == [31, 10_050, 10_020]
        async with harness.ledger.unit_of_work() as uow:  # streamed inside a transaction
            window = await uow.messages.window("big", after_seq=5, limit=20_000)
        assert [window[0].seq, len(window)] == [6, 10_045]


class AppendWithStateContract:
    """An event: messages and state deltas in one call, one revision step."""

    async def test_one_append_with_deltas_moves_the_revision_by_exactly_one(
        self, harness: Harness
    ) -> None:
        ledger = harness.ledger
        record = await ledger.sessions.create(
            "event", app_name="app", user_id="ana", state={"keep": 1, "drop": 2}
        )
        done = await ledger.messages.append(
            record,
            [at(0, "the event")],
            state_delta={"set": {"step": 1}, "delete": ["drop"]},
            app_state_delta=StateDelta(set={"visits": 10}),
            user_state_delta={"set": {"name": "Ana"}},
        )
        assert done.session.revision == record.revision + 1
        assert done.session.state == {"keep": 1, "step": 1}
        assert await ledger.sessions.get("event") == done.session
        assert (await ledger.app_state.get("app")).state == {"visits": 10}
        assert (await ledger.user_state.get("app", "ana")).state == {"name": "Ana"}

    async def test_a_blind_append_applies_the_delta_to_the_stored_state(
        self, harness: Harness
    ) -> None:
        record = await harness.ledger.sessions.create("blind-delta", state={"a": 1})
        await harness.ledger.sessions.save(record.model_copy(update={"state": {"a": 2}}))
        done = await harness.ledger.messages.append(
            "blind-delta", at(0), state_delta={"set": {"b": 3}}
        )
        assert done.session.state == {"a": 2, "b": 3}

    async def test_a_stale_append_with_deltas_changes_nothing(self, harness: Harness) -> None:
        ledger = harness.ledger
        record = await ledger.sessions.create("stale-event", app_name="app")
        await ledger.messages.append(record, at(0))
        with pytest.raises(ConflictError):
            await ledger.messages.append(
                record, at(1), state_delta={"set": {"x": 1}}, app_state_delta={"set": {"x": 1}}
            )
        assert (await ledger.sessions.get("stale-event")).state == {}
        assert (await ledger.app_state.get("app")).revision == 0

    async def test_an_app_or_user_delta_needs_the_session_to_have_that_scope(
        self, harness: Harness
    ) -> None:
        record = await harness.ledger.sessions.create("unscoped", app_name="app")
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.messages.append(record, at(0), user_state_delta={"set": {"k": 1}})
        assert raised.value.path == "user_state_delta"
        await harness.ledger.sessions.create("no-app")
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.messages.append("no-app", at(0), app_state_delta={"set": {}})
        assert raised.value.path == "app_state_delta"
        assert await harness.ledger.messages.all("no-app") == []

    @pytest.mark.parametrize(
        ("delta", "path"),
        [
            ({"set": {"x": float("inf")}}, "state_delta.set['x']"),
            ({"set": {"big": 1e20}}, "state_delta.set['big']"),
            ("not a delta", "state_delta"),
        ],
        ids=["infinity", "jsonb-float", "text"],
    )
    @tier("logic")
    async def test_a_bad_state_delta_is_refused_naming_it(
        self, harness: Harness, delta: Any, path: str
    ) -> None:
        record = await harness.ledger.sessions.create("bad-delta")
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.messages.append(record, at(0), state_delta=delta)
        assert raised.value.path == path
        assert (await harness.ledger.sessions.get("bad-delta")).revision == record.revision


class StepQueryContract:
    """Steps by run and by kind."""

    async def test_steps_are_found_by_run_and_by_kind(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("trace")
        await harness.ledger.steps.append(
            "trace",
            [
                NewStep(kind="model", run_id="run-1"),
                NewStep(kind="tool", name="search", run_id="run-1"),
                NewStep(kind="model", run_id="run-2"),
                NewStep(kind="tool", name="fetch", run_id="run-2"),
            ],
        )
        by_run = await harness.ledger.steps.by_run("trace", "run-2")
        by_kind = await harness.ledger.steps.by_kind("trace", "tool")
        assert [s.seq for s in by_run] == [3, 4]
        assert [s.name for s in by_kind] == ["search", "fetch"]
        page = await harness.ledger.steps.by_kind("trace", "model", after_seq=1, limit=1)
        assert [s.seq for s in page] == [3]

    async def test_by_run_of_an_unknown_session_is_not_found(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("no-runs")
        assert await harness.ledger.steps.by_run("no-runs", "run-1") == []
        with pytest.raises(NotFoundError):
            await harness.ledger.steps.by_kind("nobody", "tool")

    @tier("logic")
    async def test_a_bad_kind_or_limit_is_refused_naming_it(self, harness: Harness) -> None:
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.steps.by_kind("any", "t\x00ol")
        assert raised.value.path == "kind"
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.steps.by_run("any", "run", limit=0)
        assert raised.value.path == "limit"


class ConversationReadContract:
    """``messages.conversation``: the session and its messages in one call."""

    async def test_conversation_reads_the_session_and_every_message(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create("turn")
        done = await harness.ledger.messages.append(record, [at(0), at(1), at(2)])
        read = await harness.ledger.messages.conversation("turn")
        assert read.session == done.session
        assert read.messages == done.messages
        assert read.session.message_count == len(read.messages)

    async def test_conversation_with_last_reads_the_newest_in_seq_order(
        self, harness: Harness
    ) -> None:
        await harness.ledger.sessions.create("tail")
        await harness.ledger.messages.append("tail", [at(n) for n in range(5)])
        read = await harness.ledger.messages.conversation("tail", last=2)
        assert [m.seq for m in read.messages] == [4, 5]
        assert read.session.message_count == 5

    async def test_conversation_of_an_empty_session_has_no_messages(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create("empty")
        read = await harness.ledger.messages.conversation("empty", last=10)
        assert (read.session, read.messages) == (record, [])

    async def test_conversation_of_an_unknown_session_is_not_found(self, harness: Harness) -> None:
        with pytest.raises(NotFoundError):
            await harness.ledger.messages.conversation("nobody")

    @pytest.mark.parametrize("last", [0, -1, 2**31, True])
    @tier("logic")
    async def test_conversation_refuses_a_last_out_of_range(
        self, harness: Harness, last: Any
    ) -> None:
        await harness.ledger.sessions.create("bounds")
        with pytest.raises(ValidationError, match="last"):
            await harness.ledger.messages.conversation("bounds", last=last)
