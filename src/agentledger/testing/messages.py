"""Contract: messages, the conversation versioned with its session."""

from __future__ import annotations

from typing import Any

import pytest

from agentledger import ConflictError, NewMessage, NotFoundError, ValidationError

from .harness import Harness, tier

CONTENTS: list[Any] = [
    "plain text",
    {"parts": [{"type": "text", "text": "héllo ✓ 🚀"}], "n": 2**63 - 1, "f": -0.0},
    ["a", 1, 2.5, None, True, {"deep": [[[]]]}],
    None,
    12345678901234567890,
]


def user(text: str) -> NewMessage:
    """A user message with ``text`` as its content."""
    return NewMessage(role="user", content=text)


class MessageContract:
    """Appending, replacing and reading messages."""

    async def test_append_stores_messages_in_order_and_bumps_the_revision(
        self, harness: Harness
    ) -> None:
        record = await harness.ledger.sessions.create("chat")
        after = (
            await harness.ledger.messages.append(
                record,
                [user("hi"), {"role": "assistant", "content": "hello", "metadata": {"id": 7}}],
            )
        ).session
        assert after.revision == record.revision + 1
        assert (after.message_count, after.message_seq) == (2, 2)
        messages = await harness.ledger.messages.all("chat")
        assert [(m.seq, m.role, m.content) for m in messages] == [
            (1, "user", "hi"),
            (2, "assistant", "hello"),
        ]
        assert messages[1].metadata == {"id": 7}
        assert messages[0].created_at.tzinfo is not None

    @pytest.mark.parametrize("content", CONTENTS, ids=lambda c: type(c).__name__)
    async def test_content_of_any_json_value_round_trips_exactly(
        self, harness: Harness, content: Any
    ) -> None:
        record = await harness.ledger.sessions.create("json")
        await harness.ledger.messages.append(record, NewMessage(role="tool", content=content))
        (message,) = await harness.ledger.messages.all("json")
        assert message.content == content
        assert type(message.content) is type(content)

    async def test_appending_from_a_stale_record_conflicts_and_stores_nothing(
        self, harness: Harness
    ) -> None:
        record = await harness.ledger.sessions.create("stale-chat")
        winner = (await harness.ledger.messages.append(record, user("first"))).session
        with pytest.raises(ConflictError) as raised:
            await harness.ledger.messages.append(record, [user("lost 1"), user("lost 2")])
        assert raised.value.reason == "stale"
        assert [m.content for m in await harness.ledger.messages.all("stale-chat")] == ["first"]
        assert await harness.ledger.sessions.get("stale-chat") == winner

    async def test_appending_to_a_deleted_session_is_a_conflict_deleted(
        self, harness: Harness
    ) -> None:
        record = await harness.ledger.sessions.create("deleted-chat")
        await harness.ledger.sessions.delete("deleted-chat")
        with pytest.raises(ConflictError) as raised:
            await harness.ledger.messages.append(record, user("anyone?"))
        assert raised.value.reason == "deleted"
        assert not await harness.ledger.sessions.exists("deleted-chat")

    async def test_a_blind_append_never_conflicts_and_bumps_the_revision(
        self, harness: Harness
    ) -> None:
        record = await harness.ledger.sessions.create("blind")
        await harness.ledger.messages.append(record, user("one"))
        after = (await harness.ledger.messages.append("blind", user("two"))).session
        assert after.revision == record.revision + 2
        assert [m.seq for m in await harness.ledger.messages.all("blind")] == [1, 2]
        with pytest.raises(ConflictError):
            await harness.ledger.sessions.save(record)

    async def test_a_blind_append_to_an_unknown_session_is_not_found(
        self, harness: Harness
    ) -> None:
        with pytest.raises(NotFoundError):
            await harness.ledger.messages.append("nobody", user("hello?"))
        assert not await harness.ledger.sessions.exists("nobody")

    async def test_replace_swaps_the_conversation_and_continues_the_seqs(
        self, harness: Harness
    ) -> None:
        record = await harness.ledger.sessions.create("compact")
        record = (
            await harness.ledger.messages.append(record, [user("a"), user("b"), user("c")])
        ).session
        after = await harness.ledger.messages.replace(
            record, [NewMessage(role="system", content="summary of a, b, c"), user("d")]
        )
        assert (after.message_count, after.message_seq, after.revision) == (2, 5, 3)
        messages = await harness.ledger.messages.all("compact")
        assert [(m.seq, m.content) for m in messages] == [(4, "summary of a, b, c"), (5, "d")]
        after = (await harness.ledger.messages.append(after, user("e"))).session
        assert [m.seq for m in await harness.ledger.messages.all("compact")] == [4, 5, 6]

    async def test_a_stale_replace_conflicts_and_changes_nothing(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create("stale-replace")
        current = (await harness.ledger.messages.append(record, user("keep me"))).session
        with pytest.raises(ConflictError):
            await harness.ledger.messages.replace(record, [user("gone")])
        assert [m.content for m in await harness.ledger.messages.all("stale-replace")] == [
            "keep me"
        ]
        assert await harness.ledger.sessions.get("stale-replace") == current

    async def test_last_returns_the_newest_n_in_chronological_order(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create("long")
        await harness.ledger.messages.append(record, [user(str(i)) for i in range(1, 11)])
        last = await harness.ledger.messages.last("long", 3)
        assert [m.content for m in last] == ["8", "9", "10"]
        assert [m.seq for m in await harness.ledger.messages.last("long", 50)] == list(range(1, 11))

    async def test_window_pages_through_the_conversation(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create("paged")
        await harness.ledger.messages.append(record, [user(str(i)) for i in range(1, 8)])
        first = await harness.ledger.messages.window("paged", limit=3)
        second = await harness.ledger.messages.window("paged", after_seq=first[-1].seq, limit=3)
        third = await harness.ledger.messages.window("paged", after_seq=second[-1].seq, limit=3)
        assert [[m.seq for m in page] for page in (first, second, third)] == [
            [1, 2, 3],
            [4, 5, 6],
            [7],
        ]

    async def test_reading_an_empty_conversation_gives_an_empty_list(
        self, harness: Harness
    ) -> None:
        await harness.ledger.sessions.create("quiet")
        assert await harness.ledger.messages.all("quiet") == []
        assert await harness.ledger.messages.last("quiet", 5) == []

    async def test_reading_the_messages_of_an_unknown_session_is_not_found(
        self, harness: Harness
    ) -> None:
        with pytest.raises(NotFoundError):
            await harness.ledger.messages.all("nobody")
        with pytest.raises(NotFoundError):
            await harness.ledger.messages.window("nobody")

    @pytest.mark.parametrize(("n", "name"), [(0, "n"), (-1, "n"), (2**31, "n"), (True, "n")])
    @tier("logic")
    async def test_a_count_out_of_range_is_refused(
        self, harness: Harness, n: Any, name: str
    ) -> None:
        with pytest.raises(ValidationError):
            await harness.ledger.messages.last("any", n)

    async def test_the_first_user_message_fills_the_listing_preview(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create("untitled")
        record = (
            await harness.ledger.messages.append(
                record,
                [
                    NewMessage(role="system", content="be brief"),
                    NewMessage(
                        role="user", content={"parts": [{"type": "text", "text": "Plan  a\ntrip"}]}
                    ),
                ],
            )
        ).session
        await harness.ledger.messages.append(record, user("second question"))
        assert (await harness.ledger.sessions.get("untitled")).preview == "Plan a trip"
        (item,) = (await harness.ledger.sessions.list()).items
        assert item.title == "Plan a trip"

    async def test_a_long_opening_message_is_shortened_for_the_preview(
        self, harness: Harness
    ) -> None:
        record = await harness.ledger.sessions.create("wordy")
        await harness.ledger.messages.append(record, user("word " * 200))
        preview = (await harness.ledger.sessions.get("wordy")).preview
        assert preview is not None and len(preview) <= 256 and preview.endswith("…")

    @pytest.mark.parametrize(
        ("message", "path"),
        [
            ({"role": "user", "content": float("nan")}, "messages[1].content"),
            ({"role": "user", "content": {"k": "a\x00b"}}, "messages[1].content['k']"),
            (
                {"role": "user", "content": "x", "metadata": {"t": (1,)}},
                "messages[1].metadata['t']",
            ),
            ({"role": "", "content": "x"}, "messages[1]"),
            ({"role": "user", "content": "x", "colour": "red"}, "messages[1]"),
        ],
        ids=["nan", "nul", "tuple", "empty-role", "unknown-field"],
    )
    @tier("logic")
    async def test_an_invalid_message_is_refused_by_its_path_and_none_is_stored(
        self, harness: Harness, message: dict[str, Any], path: str
    ) -> None:
        record = await harness.ledger.sessions.create("strict")
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.messages.append(record, [user("fine"), message])
        assert path in str(raised.value)
        assert await harness.ledger.messages.all("strict") == []
        assert (await harness.ledger.sessions.get("strict")).revision == record.revision

    async def test_append_and_save_in_one_unit_of_work_commit_together(
        self, harness: Harness
    ) -> None:
        record = await harness.ledger.sessions.create("together")
        async with harness.ledger.unit_of_work() as uow:
            record = (await uow.messages.append(record, user("question"))).session
            record = await uow.sessions.save(record.model_copy(update={"state": {"asked": 1}}))
        stored = await harness.ledger.sessions.get("together")
        assert (stored.revision, stored.state, stored.message_count) == (3, {"asked": 1}, 1)


@tier("driver")
class MessageConcurrencyContract:
    """Concurrent appenders of one conversation."""

    async def test_two_appenders_at_one_revision_exactly_one_wins(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create("pair")
        barrier = harness.barrier(2)

        async def appender(index: int) -> str:
            await barrier.wait()
            try:
                await harness.ledger.messages.append(record, user(f"from {index}"))
            except ConflictError as error:
                return error.reason
            return "appended"

        assert sorted(await harness.concurrently(2, appender)) == ["appended", "stale"]
        assert len(await harness.ledger.messages.all("pair")) == 1

    async def test_read_append_rounds_keep_every_acknowledged_message(
        self, harness: Harness
    ) -> None:
        writers, rounds = 8, 50
        await harness.ledger.sessions.create("busy")
        failures: list[BaseException] = []
        conflicts = [0] * writers

        async def writer(index: int) -> None:
            for turn in range(rounds):
                while True:
                    record = await harness.ledger.sessions.get("busy")
                    try:
                        await harness.ledger.messages.append(record, user(f"{index}:{turn}"))
                        break
                    except ConflictError:
                        conflicts[index] += 1
                    except Exception as error:  # every failed attempt must be a conflict
                        failures.append(error)
                        raise

        await harness.concurrently(writers, writer)
        assert failures == []
        messages = await harness.ledger.messages.all("busy")
        assert [m.seq for m in messages] == list(range(1, writers * rounds + 1))
        assert sorted(m.content for m in messages) == sorted(
            f"{i}:{t}" for i in range(writers) for t in range(rounds)
        )
        assert (await harness.ledger.sessions.get("busy")).message_count == writers * rounds
        assert sum(conflicts) > 0, "no contention was produced; the test proved nothing"

    async def test_blind_appenders_never_conflict(self, harness: Harness) -> None:
        writers, rounds = 8, 25
        await harness.ledger.sessions.create("blind-busy")

        async def writer(index: int) -> None:
            for turn in range(rounds):
                await harness.ledger.messages.append("blind-busy", user(f"{index}:{turn}"))

        await harness.concurrently(writers, writer)
        messages = await harness.ledger.messages.all("blind-busy")
        assert [m.seq for m in messages] == list(range(1, writers * rounds + 1))


__all__ = ["MessageConcurrencyContract", "MessageContract"]
