"""Contract: checkpoints, what a paused run needs to resume.

Expiry and the size limit need a second ledger with its own clock or limits: those
tests use the harness's ``configured`` hook, and skip without it.
"""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agentledger import (
    Checkpoint,
    CheckpointPayload,
    ConflictError,
    InvalidIdError,
    Limits,
    NewMessage,
    NotFoundError,
    PendingToolCall,
    UsageError,
    ValidationError,
)

from .harness import Harness, tier

EMPTY = CheckpointPayload()
HOUR = timedelta(hours=1)
MiB = 1024 * 1024
UNKNOWN_REF = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
"""A well-formed checkpoint ref that no store has made (its time is in 2016)."""
GARBAGE_REFS: list[Any] = ["", "x" * 65, "a b", "../etc", "quote'", "nul\x00", "naïve", 7, None]
GARBAGE_REF_IDS = ["empty", "65-chars", "space", "path", "quote", "nul", "accent", "int", "none"]


class SettableClock:
    """A clock a test moves by hand; starts at the real time."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        """Move the clock forward by ``delta``."""
        self.now += delta


def ledger_with(harness: Harness, **options: Any) -> AbstractAsyncContextManager[Any]:
    """A second ledger on the harness's data with its own ``clock`` or ``limits``,
    through the ``configured`` hook (the test skips without it)."""
    opened: AbstractAsyncContextManager[Any] = harness.require("configured")(**options)
    return opened


def state(value: Any) -> CheckpointPayload:
    """A payload whose runtime state holds ``value``."""
    return CheckpointPayload(runtime_state={"value": value})


def json_size(payload: CheckpointPayload) -> int:
    """The size agentledger measures: bytes of compact UTF-8 JSON text."""
    text = json.dumps(payload.model_dump(), ensure_ascii=False, separators=(",", ":"))
    return len(text.encode("utf-8"))


def sized(size: int, *, filler: str = '"\\') -> CheckpointPayload:
    """A payload of exactly ``size`` bytes of JSON text, made of ``filler`` characters
    (by default ``"`` and ``\\``, the worst case for escaping: each is two bytes of JSON
    and twice that again once a MariaDB driver escapes the statement)."""
    base = json_size(state(""))
    unit = json_size(state(filler)) - base
    count, rest = divmod(size - base, unit)
    payload = state(filler * count + "x" * rest)
    assert json_size(payload) == size
    return payload


def full_payload() -> CheckpointPayload:
    """A payload with every field populated."""
    return CheckpointPayload(
        context_window=[
            NewMessage(role="system", content="You are terse."),
            NewMessage(
                role="user",
                content={"parts": [{"type": "text", "text": "Book a table — ✓ 🚀"}]},
                metadata={"client": "web", "n": 2**63 - 1},
            ),
            NewMessage(
                role="assistant",
                content=None,
                metadata={"tool_calls": [{"id": "call_1", "name": "reserve"}]},
            ),
        ],
        pending_tool_calls={
            "call_1": PendingToolCall(
                tool_call={"id": "call_1", "name": "reserve", "arguments": {"people": 4}},
                interrupt_active=True,
            ),
            "call_2": PendingToolCall(tool_call={"id": "call_2", "name": "lookup"}),
        },
        interrupt_requesters={"int_1": "call_1"},
        runtime_state={"turn": 3, "ratio": -0.5, "tags": ["a", "é"], "nested": {"x": [[]]}},
        pending_interrupts=[{"id": "int_1", "kind": "approval", "question": "Pay 20 €?"}],
        resolved_interrupts={"int_0": {"answer": True}},
    )


async def refuse_as_invalid_ids(ledger: Any, session_id: str, garbage: Any) -> None:
    """Give ``garbage`` as the ref of every checkpoint operation taking one (as the
    parent too, unless None, which means no parent), expecting InvalidIdError each time."""
    with pytest.raises(InvalidIdError):
        await ledger.checkpoints.get(garbage)
    with pytest.raises(InvalidIdError):
        await ledger.checkpoints.delete(garbage)
    with pytest.raises(InvalidIdError):
        await ledger.checkpoints.fork(session_id, garbage, EMPTY)
    if garbage is not None:
        with pytest.raises(InvalidIdError):
            await ledger.checkpoints.save(session_id, EMPTY, parent=garbage)


class CheckpointContract:
    """Saving, resuming, forking, reading, listing, deleting and expiring checkpoints."""

    async def test_the_first_save_is_the_latest_with_seq_1_and_no_parent(
        self, harness: Harness
    ) -> None:
        await harness.ledger.sessions.create("run")
        saved = await harness.ledger.checkpoints.save("run", state(1))
        assert (saved.session_id, saved.seq, saved.parent_ref, saved.expires_at) == (
            "run",
            1,
            None,
            None,
        )
        assert len(saved.ref) == 26
        assert saved.created_at.tzinfo is not None
        assert await harness.ledger.checkpoints.latest("run") == saved
        assert (await harness.ledger.sessions.get("run")).latest_checkpoint_ref == saved.ref

    async def test_a_save_without_parent_continues_the_lineage(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("run")
        first = await harness.ledger.checkpoints.save("run", state(1))
        second = await harness.ledger.checkpoints.save("run", state(2))
        third = await harness.ledger.checkpoints.save("run", state(3))
        assert [c.seq for c in (first, second, third)] == [1, 2, 3]
        assert (second.parent_ref, third.parent_ref) == (first.ref, second.ref)
        assert await harness.ledger.checkpoints.latest("run") == third

    async def test_a_payload_with_every_field_populated_round_trips_equal(
        self, harness: Harness
    ) -> None:
        await harness.ledger.sessions.create("run")
        payload = full_payload()
        saved = await harness.ledger.checkpoints.save("run", payload)
        assert saved.payload == payload
        assert (await harness.ledger.checkpoints.get(saved.ref)).payload == payload
        latest = await harness.ledger.checkpoints.latest("run")
        assert latest is not None and latest.payload == payload
        assert latest.payload.model_dump() == payload.model_dump()

    async def test_a_payload_may_be_given_as_a_dict(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("run")
        saved = await harness.ledger.checkpoints.save("run", full_payload().model_dump())
        assert saved.payload == full_payload()

    async def test_stored_messages_can_form_the_context_window(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create("run")
        await harness.ledger.messages.append(
            record, [NewMessage(role="user", content="hi", metadata={"k": 1})]
        )
        window = await harness.ledger.messages.all("run")
        saved = await harness.ledger.checkpoints.save(
            "run", CheckpointPayload(context_window=window)
        )
        stored = await harness.ledger.checkpoints.get(saved.ref)
        assert stored.payload.context_window == [
            NewMessage(role="user", content="hi", metadata={"k": 1})
        ]

    async def test_resuming_from_the_latest_stores_a_child_of_it(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("run")
        paused = await harness.ledger.checkpoints.save("run", state("paused"))
        resumed = await harness.ledger.checkpoints.save("run", state("resumed"), parent=paused.ref)
        assert (resumed.parent_ref, resumed.seq) == (paused.ref, 2)
        assert await harness.ledger.checkpoints.latest("run") == resumed

    async def test_resuming_from_a_parent_that_is_not_the_latest_conflicts_and_stores_nothing(
        self, harness: Harness
    ) -> None:
        await harness.ledger.sessions.create("run")
        old = await harness.ledger.checkpoints.save("run", state(1))
        newest = await harness.ledger.checkpoints.save("run", state(2))
        with pytest.raises(ConflictError) as raised:
            await harness.ledger.checkpoints.save("run", state("lost"), parent=old.ref)
        assert raised.value.reason == "parent"
        assert (raised.value.expected, raised.value.actual) == (old.ref, newest.ref)
        assert await harness.ledger.checkpoints.latest("run") == newest
        assert len((await harness.ledger.checkpoints.list("run")).items) == 2
        assert (await harness.ledger.sessions.get("run")).checkpoint_seq == 2

    async def test_resuming_from_an_unknown_parent_conflicts(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("run")
        with pytest.raises(ConflictError) as raised:
            await harness.ledger.checkpoints.save("run", EMPTY, parent=UNKNOWN_REF)
        assert raised.value.reason == "parent"
        assert await harness.ledger.checkpoints.latest("run") is None

    async def test_resuming_from_another_sessions_checkpoint_conflicts(
        self, harness: Harness
    ) -> None:
        await harness.ledger.sessions.create("run")
        await harness.ledger.sessions.create("other")
        await harness.ledger.checkpoints.save("run", EMPTY)
        elsewhere = await harness.ledger.checkpoints.save("other", EMPTY)
        with pytest.raises(ConflictError):
            await harness.ledger.checkpoints.save("run", EMPTY, parent=elsewhere.ref)

    @pytest.mark.parametrize("parent", [None, "01ARZ3NDEKTSV4RRFFQ69G5FAV"], ids=["plain", "cas"])
    async def test_checkpointing_an_unknown_session_is_not_found_and_creates_nothing(
        self, harness: Harness, parent: str | None
    ) -> None:
        with pytest.raises(NotFoundError) as raised:
            await harness.ledger.checkpoints.save("nobody", EMPTY, parent=parent)
        assert raised.value.entity == "session"
        assert not await harness.ledger.sessions.exists("nobody")

    async def test_checkpointing_a_deleted_session_is_not_found(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("gone")
        last = await harness.ledger.checkpoints.save("gone", EMPTY)
        await harness.ledger.sessions.delete("gone")
        with pytest.raises(NotFoundError):
            await harness.ledger.checkpoints.save("gone", EMPTY, parent=last.ref)
        with pytest.raises(NotFoundError):
            await harness.ledger.checkpoints.save("gone", EMPTY)
        assert not await harness.ledger.sessions.exists("gone")

    async def test_deleting_the_session_removes_its_checkpoints(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("gone")
        refs = [(await harness.ledger.checkpoints.save("gone", state(i))).ref for i in range(3)]
        await harness.ledger.sessions.delete("gone")
        for ref in refs:
            with pytest.raises(NotFoundError):
                await harness.ledger.checkpoints.get(ref)
        with pytest.raises(NotFoundError):
            await harness.ledger.checkpoints.latest("gone")
        await harness.ledger.sessions.create("gone")
        assert (await harness.ledger.checkpoints.list("gone")).items == []

    async def test_checkpoint_writes_never_bump_the_revision_nor_conflict_with_a_save(
        self, harness: Harness
    ) -> None:
        record = await harness.ledger.sessions.create("run")
        first = await harness.ledger.checkpoints.save("run", state(1))
        second = await harness.ledger.checkpoints.save("run", state(2), parent=first.ref)
        await harness.ledger.checkpoints.fork("run", first.ref, state(3))
        await harness.ledger.checkpoints.delete(second.ref)
        await harness.ledger.checkpoints.prune("run", 1)
        await harness.ledger.checkpoints.delete_all("run")
        assert (await harness.ledger.sessions.get("run")).revision == record.revision
        saved = await harness.ledger.sessions.save(record.model_copy(update={"title": "t"}))
        assert saved.revision == record.revision + 1

    async def test_fork_branches_from_an_older_checkpoint_and_becomes_the_latest(
        self, harness: Harness
    ) -> None:
        await harness.ledger.sessions.create("run")
        first = await harness.ledger.checkpoints.save("run", state(1))
        second = await harness.ledger.checkpoints.save("run", state(2))
        fork = await harness.ledger.checkpoints.fork("run", first.ref, state("branch"))
        assert (fork.parent_ref, fork.seq) == (first.ref, 3)
        assert await harness.ledger.checkpoints.latest("run") == fork
        with pytest.raises(ConflictError):
            await harness.ledger.checkpoints.save("run", state("late"), parent=second.ref)
        after = await harness.ledger.checkpoints.save("run", state(4), parent=fork.ref)
        assert after.parent_ref == fork.ref

    async def test_fork_from_a_checkpoint_of_another_session_is_not_found(
        self, harness: Harness
    ) -> None:
        await harness.ledger.sessions.create("run")
        await harness.ledger.sessions.create("other")
        elsewhere = await harness.ledger.checkpoints.save("other", EMPTY)
        with pytest.raises(NotFoundError) as raised:
            await harness.ledger.checkpoints.fork("run", elsewhere.ref, EMPTY)
        assert raised.value.entity == "checkpoint"
        assert await harness.ledger.checkpoints.latest("run") is None

    async def test_fork_from_an_unknown_ref_or_session_is_not_found(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("run")
        known = await harness.ledger.checkpoints.save("run", EMPTY)
        with pytest.raises(NotFoundError):
            await harness.ledger.checkpoints.fork("run", UNKNOWN_REF, EMPTY)
        with pytest.raises(NotFoundError) as raised:
            await harness.ledger.checkpoints.fork("nobody", known.ref, EMPTY)
        assert raised.value.entity == "session"
        assert (await harness.ledger.checkpoints.latest("run")) == known

    async def test_get_returns_the_checkpoint_and_unknown_refs_are_not_found(
        self, harness: Harness
    ) -> None:
        await harness.ledger.sessions.create("run")
        saved = await harness.ledger.checkpoints.save("run", state("x"))
        assert await harness.ledger.checkpoints.get(saved.ref) == saved
        for missing in (saved.ref[:-1], saved.ref.lower(), saved.ref + "0", "x" * 64):
            with pytest.raises(NotFoundError) as raised:
                await harness.ledger.checkpoints.get(missing)
            assert raised.value.entity == "checkpoint"

    @pytest.mark.parametrize("garbage", GARBAGE_REFS, ids=GARBAGE_REF_IDS)
    @tier("logic")
    async def test_a_garbage_ref_is_an_invalid_id(self, harness: Harness, garbage: Any) -> None:
        await harness.ledger.sessions.create("run")
        await refuse_as_invalid_ids(harness.ledger, "run", garbage)
        assert await harness.ledger.checkpoints.latest("run") is None

    async def test_latest_of_a_session_without_checkpoints_is_none(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("run")
        assert await harness.ledger.checkpoints.latest("run") is None

    async def test_reading_checkpoints_of_an_unknown_session_is_not_found(
        self, harness: Harness
    ) -> None:
        with pytest.raises(NotFoundError):
            await harness.ledger.checkpoints.latest("nobody")
        with pytest.raises(NotFoundError):
            await harness.ledger.checkpoints.list("nobody")
        with pytest.raises(NotFoundError):
            await harness.ledger.checkpoints.delete_all("nobody")
        with pytest.raises(NotFoundError):
            await harness.ledger.checkpoints.prune("nobody", 1)

    async def test_list_pages_newest_first_without_payloads(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("run")
        saved = [await harness.ledger.checkpoints.save("run", state(i)) for i in range(7)]
        pages, cursor = [], None
        while True:
            page = await harness.ledger.checkpoints.list("run", limit=3, cursor=cursor)
            pages.append([info.seq for info in page.items])
            cursor = page.next_cursor
            if cursor is None:
                break
        assert pages == [[7, 6, 5], [4, 3, 2], [1]]
        (newest,) = (await harness.ledger.checkpoints.list("run", limit=1)).items
        assert not hasattr(newest, "payload")
        assert (newest.ref, newest.parent_ref, newest.created_at) == (
            saved[-1].ref,
            saved[-2].ref,
            saved[-1].created_at,
        )
        assert newest.size == json_size(state(6))

    @tier("logic")
    async def test_a_tampered_cursor_is_a_validation_error(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("run")
        for i in range(3):
            await harness.ledger.checkpoints.save("run", state(i))
        cursor = (await harness.ledger.checkpoints.list("run", limit=1)).next_cursor
        assert cursor is not None
        token, digest = cursor.split(".")
        forged = token.replace(token[1], "A" if token[1] != "A" else "B", 1) + "." + digest
        for bad in (forged, cursor[:-1], cursor + "0", "garbage", "", "a.b.c", 5):
            with pytest.raises(ValidationError):
                await harness.ledger.checkpoints.list("run", cursor=bad)

    @tier("logic")
    async def test_a_cursor_from_another_session_is_refused(self, harness: Harness) -> None:
        for id in ("run", "other"):
            await harness.ledger.sessions.create(id)
            for i in range(3):
                await harness.ledger.checkpoints.save(id, state(i))
        cursor = (await harness.ledger.checkpoints.list("run", limit=1)).next_cursor
        with pytest.raises(ValidationError):
            await harness.ledger.checkpoints.list("other", cursor=cursor)

    @pytest.mark.parametrize("limit", [0, -1, 1001, True, "5"])
    @tier("logic")
    async def test_a_list_limit_out_of_range_is_refused(self, harness: Harness, limit: Any) -> None:
        await harness.ledger.sessions.create("run")
        with pytest.raises(ValidationError):
            await harness.ledger.checkpoints.list("run", limit=limit)

    async def test_delete_removes_a_checkpoint_and_unknown_refs_are_not_found(
        self, harness: Harness
    ) -> None:
        await harness.ledger.sessions.create("run")
        first = await harness.ledger.checkpoints.save("run", state(1))
        second = await harness.ledger.checkpoints.save("run", state(2))
        await harness.ledger.checkpoints.delete(first.ref)
        with pytest.raises(NotFoundError):
            await harness.ledger.checkpoints.get(first.ref)
        with pytest.raises(NotFoundError):
            await harness.ledger.checkpoints.delete(first.ref)
        assert await harness.ledger.checkpoints.latest("run") == second

    async def test_deleting_the_latest_moves_the_pointer_to_the_newest_remaining(
        self, harness: Harness
    ) -> None:
        await harness.ledger.sessions.create("run")
        first = await harness.ledger.checkpoints.save("run", state(1))
        second = await harness.ledger.checkpoints.save("run", state(2))
        await harness.ledger.checkpoints.delete(second.ref)
        assert (await harness.ledger.sessions.get("run")).latest_checkpoint_ref == first.ref
        assert await harness.ledger.checkpoints.latest("run") == first
        resumed = await harness.ledger.checkpoints.save("run", state(3), parent=first.ref)
        assert resumed.seq == 3, "a seq is never reused"
        await harness.ledger.checkpoints.delete(first.ref)
        await harness.ledger.checkpoints.delete(resumed.ref)
        assert (await harness.ledger.sessions.get("run")).latest_checkpoint_ref is None
        assert await harness.ledger.checkpoints.latest("run") is None

    async def test_deleting_the_latest_skips_the_checkpoints_deleted_before_it(
        self, harness: Harness
    ) -> None:
        await harness.ledger.sessions.create("run")
        first = await harness.ledger.checkpoints.save("run", state(1))
        second = await harness.ledger.checkpoints.save("run", state(2))
        third = await harness.ledger.checkpoints.save("run", state(3))
        await harness.ledger.checkpoints.delete(second.ref)
        await harness.ledger.checkpoints.delete(third.ref)
        assert (await harness.ledger.sessions.get("run")).latest_checkpoint_ref == first.ref

    async def test_delete_all_counts_clears_the_pointer_and_keeps_the_counter(
        self, harness: Harness
    ) -> None:
        await harness.ledger.sessions.create("run")
        await harness.ledger.sessions.create("other")
        kept = await harness.ledger.checkpoints.save("other", EMPTY)
        for i in range(3):
            await harness.ledger.checkpoints.save("run", state(i))
        assert await harness.ledger.checkpoints.delete_all("run") == 3
        assert await harness.ledger.checkpoints.delete_all("run") == 0
        assert await harness.ledger.checkpoints.latest("run") is None
        assert (await harness.ledger.sessions.get("run")).latest_checkpoint_ref is None
        again = await harness.ledger.checkpoints.save("run", EMPTY)
        assert (again.seq, again.parent_ref) == (4, None)
        assert await harness.ledger.checkpoints.latest("other") == kept

    async def test_prune_keeps_the_newest_and_counts_the_rest(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("run")
        saved = [await harness.ledger.checkpoints.save("run", state(i)) for i in range(5)]
        assert await harness.ledger.checkpoints.prune("run", 2) == 3
        listed = (await harness.ledger.checkpoints.list("run")).items
        assert [info.ref for info in listed] == [saved[4].ref, saved[3].ref]
        assert await harness.ledger.checkpoints.prune("run", 2) == 0
        assert await harness.ledger.checkpoints.prune("run", 10) == 0
        assert (await harness.ledger.sessions.get("run")).latest_checkpoint_ref == saved[4].ref
        assert await harness.ledger.checkpoints.prune("run", 0) == 2
        assert await harness.ledger.checkpoints.latest("run") is None
        assert (await harness.ledger.sessions.get("run")).latest_checkpoint_ref is None

    @pytest.mark.parametrize("keep_last", [-1, True, 1.5, "2"])
    @tier("logic")
    async def test_prune_refuses_a_bad_keep_last(self, harness: Harness, keep_last: Any) -> None:
        await harness.ledger.sessions.create("run")
        with pytest.raises(ValidationError):
            await harness.ledger.checkpoints.prune("run", keep_last)

    @pytest.mark.parametrize(
        ("payload", "path"),
        [
            (state(float("nan")), "payload['runtime_state']['value']"),
            (state({"k": (1, 2)}), "payload['runtime_state']['value']['k']"),
            (state("nul\x00"), "payload['runtime_state']['value']"),
            (CheckpointPayload(pending_interrupts={1: "x"}), "payload['pending_interrupts']"),
            (
                CheckpointPayload(interrupt_requesters={"i": "lone \ud800"}),
                "payload['interrupt_requesters']['i']",
            ),
            (
                CheckpointPayload(context_window=[NewMessage(role="user", content={"x": {1}})]),
                "payload['context_window'][0]['content']['x']",
            ),
            ({"colour": "red"}, "payload"),
            ({"pending_tool_calls": {"c": {"tool_call": "not an object"}}}, "payload"),
            ([1, 2], "payload"),
        ],
        ids=["nan", "tuple", "nul", "int-key", "surrogate", "set", "unknown", "call", "list"],
    )
    @tier("logic")
    async def test_a_payload_that_is_not_json_is_refused_by_its_path_and_nothing_is_stored(
        self, harness: Harness, payload: Any, path: str
    ) -> None:
        await harness.ledger.sessions.create("run")
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.checkpoints.save("run", payload)
        assert raised.value.path == path
        assert await harness.ledger.checkpoints.latest("run") is None
        assert (await harness.ledger.sessions.get("run")).checkpoint_seq == 0

    @pytest.mark.parametrize("ttl", [timedelta(0), -HOUR, 3600, timedelta(days=10**7)])
    @tier("logic")
    async def test_a_bad_ttl_is_refused(self, harness: Harness, ttl: Any) -> None:
        await harness.ledger.sessions.create("run")
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.checkpoints.save("run", EMPTY, ttl=ttl)
        assert raised.value.path == "ttl"

    async def test_a_payload_at_the_limit_is_stored_and_one_byte_over_is_refused_before_any_write(
        self, harness: Harness
    ) -> None:
        limit = 2000
        async with ledger_with(harness, limits=Limits(max_checkpoint_bytes=limit)) as ledger:
            await ledger.sessions.create("run")
            saved = await ledger.checkpoints.save("run", sized(limit))
            (info,) = (await ledger.checkpoints.list("run")).items
            assert info.size == limit
            with pytest.raises(ValidationError) as raised:
                await ledger.checkpoints.save("run", sized(limit + 1))
            assert raised.value.path == "payload"
            assert await ledger.checkpoints.latest("run") == saved
            assert (await ledger.sessions.get("run")).checkpoint_seq == 1

    @pytest.mark.parametrize(
        "filler",
        ['"\\', "é", "'"],
        ids=["quotes-and-backslashes", "non-ascii", "apostrophes"],
    )
    async def test_a_payload_at_the_default_limit_with_worst_case_escaping_round_trips(
        self, harness: Harness, filler: str
    ) -> None:
        """Each filler is a worst case on the way to MariaDB: ``"`` and ``\\`` take two
        bytes of JSON and the driver escapes both again; ``'`` doubles in the driver;
        ``é`` would become ``\\u00e9`` (then ``\\\\u00e9``) under an ASCII-only encoder."""
        limit = Limits().max_checkpoint_bytes
        assert limit == 6 * MiB
        await harness.ledger.sessions.create("big")
        payload = sized(limit, filler=filler)
        saved = await harness.ledger.checkpoints.save("big", payload)
        stored = await harness.ledger.checkpoints.get(saved.ref)
        assert stored.payload == payload
        (info,) = (await harness.ledger.checkpoints.list("big")).items
        assert info.size == limit
        with pytest.raises(ValidationError):
            await harness.ledger.checkpoints.save(
                "big", sized(limit + 1, filler=filler), parent=saved.ref
            )
        assert await harness.ledger.checkpoints.latest("big") == stored

    async def test_a_five_megabyte_conversation_round_trips(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("big")
        text = 'Ünïcödé text, quotes " and \\ backslashes, emoji 🚀. ' * 190
        window = [
            NewMessage(role="user" if i % 2 else "assistant", content=f"{i}: {text}")
            for i in range(500)
        ]
        payload = CheckpointPayload(context_window=window, runtime_state={"turn": 500})
        assert 5_000_000 < json_size(payload) < Limits().max_checkpoint_bytes
        saved = await harness.ledger.checkpoints.save("big", payload)
        latest = await harness.ledger.checkpoints.latest("big")
        assert latest is not None and latest.ref == saved.ref
        assert latest.payload == payload

    async def test_saves_in_a_unit_of_work_commit_with_it_and_roll_back_with_it(
        self, harness: Harness
    ) -> None:
        record = await harness.ledger.sessions.create("run")
        async with harness.ledger.unit_of_work() as uow:
            first = await uow.checkpoints.save("run", state(1))
            await uow.messages.append(record, NewMessage(role="user", content="go"))
            assert await uow.checkpoints.latest("run") == first
        with pytest.raises(RuntimeError):
            async with harness.ledger.unit_of_work() as uow:
                await uow.checkpoints.save("run", state("lost"), parent=first.ref)
                raise RuntimeError("boom")
        assert await harness.ledger.checkpoints.latest("run") == first
        assert (await harness.ledger.sessions.get("run")).checkpoint_seq == 1

    async def test_a_parent_conflict_makes_the_unit_of_work_rollback_only(
        self, harness: Harness
    ) -> None:
        await harness.ledger.sessions.create("run")
        old = await harness.ledger.checkpoints.save("run", state(1))
        newest = await harness.ledger.checkpoints.save("run", state(2))
        async with harness.ledger.unit_of_work() as uow:
            await uow.sessions.create("side-effect")
            with pytest.raises(ConflictError):
                await uow.checkpoints.save("run", state("lost"), parent=old.ref)
            with pytest.raises(UsageError):
                await uow.checkpoints.latest("run")
        assert not await harness.ledger.sessions.exists("side-effect")
        assert await harness.ledger.checkpoints.latest("run") == newest


class CheckpointExpiryContract:
    """Expiry, with a clock the test moves."""

    async def test_ttl_sets_expires_at_from_the_clock(self, harness: Harness) -> None:
        clock = SettableClock()
        async with ledger_with(harness, clock=clock) as ledger:
            await ledger.sessions.create("run")
            saved = await ledger.checkpoints.save("run", EMPTY, ttl=HOUR)
        assert (saved.created_at, saved.expires_at) == (clock.now, clock.now + HOUR)

    async def test_an_expired_checkpoint_is_not_returned_by_latest_get_or_list(
        self, harness: Harness
    ) -> None:
        clock = SettableClock()
        async with ledger_with(harness, clock=clock) as ledger:
            await ledger.sessions.create("run")
            lasting = await ledger.checkpoints.save("run", state("lasting"))
            brief = await ledger.checkpoints.save("run", state("brief"), ttl=HOUR)
            assert await ledger.checkpoints.latest("run") == brief
            clock.advance(HOUR)
            assert await ledger.checkpoints.latest("run") == lasting
            with pytest.raises(NotFoundError):
                await ledger.checkpoints.get(brief.ref)
            assert [i.ref for i in (await ledger.checkpoints.list("run")).items] == [lasting.ref]

    async def test_when_every_checkpoint_expired_latest_is_none(self, harness: Harness) -> None:
        clock = SettableClock()
        async with ledger_with(harness, clock=clock) as ledger:
            await ledger.sessions.create("run")
            await ledger.checkpoints.save("run", EMPTY, ttl=HOUR)
            clock.advance(2 * HOUR)
            assert await ledger.checkpoints.latest("run") is None

    async def test_resuming_from_an_expired_checkpoint_conflicts(self, harness: Harness) -> None:
        clock = SettableClock()
        async with ledger_with(harness, clock=clock) as ledger:
            await ledger.sessions.create("run")
            brief = await ledger.checkpoints.save("run", EMPTY, ttl=HOUR)
            clock.advance(2 * HOUR)
            with pytest.raises(ConflictError) as raised:
                await ledger.checkpoints.save("run", state("late"), parent=brief.ref)
            assert (raised.value.reason, raised.value.actual) == ("parent", None)
            with pytest.raises(NotFoundError):
                await ledger.checkpoints.fork("run", brief.ref, EMPTY)

    async def test_resuming_from_what_latest_returned_succeeds_past_an_expired_newer_one(
        self, harness: Harness
    ) -> None:
        clock = SettableClock()
        async with ledger_with(harness, clock=clock) as ledger:
            await ledger.sessions.create("run")
            lasting = await ledger.checkpoints.save("run", state("lasting"))
            await ledger.checkpoints.save("run", state("brief"), ttl=HOUR)
            clock.advance(2 * HOUR)
            latest = await ledger.checkpoints.latest("run")
            assert latest == lasting
            resumed = await ledger.checkpoints.save("run", state("next"), parent=latest.ref)
            assert (resumed.parent_ref, resumed.seq) == (lasting.ref, 3)
            plain = await ledger.checkpoints.save("run", state("plain"))
            assert plain.parent_ref == resumed.ref

    async def test_resuming_from_an_older_one_past_an_expired_newest_still_conflicts(
        self, harness: Harness
    ) -> None:
        clock = SettableClock()
        async with ledger_with(harness, clock=clock) as ledger:
            await ledger.sessions.create("run")
            older = await ledger.checkpoints.save("run", state("older"))
            newer = await ledger.checkpoints.save("run", state("newer"))
            await ledger.checkpoints.save("run", state("brief"), ttl=HOUR)
            clock.advance(2 * HOUR)
            with pytest.raises(ConflictError) as raised:
                await ledger.checkpoints.save("run", state("late"), parent=older.ref)
            assert (raised.value.reason, raised.value.actual) == ("parent", newer.ref)
            assert await ledger.checkpoints.latest("run") == newer

    async def test_a_save_without_parent_descends_from_what_latest_returned(
        self, harness: Harness
    ) -> None:
        clock = SettableClock()
        async with ledger_with(harness, clock=clock) as ledger:
            await ledger.sessions.create("run")
            lasting = await ledger.checkpoints.save("run", state("lasting"))
            await ledger.checkpoints.save("run", state("brief"), ttl=HOUR)
            clock.advance(2 * HOUR)
            following = await ledger.checkpoints.save("run", state("next"))
            assert following.parent_ref == lasting.ref

    async def test_purge_expired_removes_exactly_the_expired_ones(self, harness: Harness) -> None:
        clock = SettableClock()
        start = clock.now
        async with ledger_with(harness, clock=clock) as ledger:
            for id in ("a", "b", "c"):
                await ledger.sessions.create(id)
            keep_a = await ledger.checkpoints.save("a", state(1))
            gone_a = await ledger.checkpoints.save("a", state(2), ttl=HOUR)
            keep_a2 = await ledger.checkpoints.save("a", state(3), ttl=3 * HOUR)
            gone_b = [await ledger.checkpoints.save("b", state(i), ttl=HOUR) for i in range(2)]
            keep_c = await ledger.checkpoints.save("c", state(1))
            gone_c = await ledger.checkpoints.save("c", state(2), ttl=HOUR / 2)
            clock.advance(2 * HOUR)
            assert await ledger.checkpoints.purge_expired() == 4
            assert await ledger.checkpoints.purge_expired() == 0
            pointers = [(await ledger.sessions.get(id)).latest_checkpoint_ref for id in "abc"]
            assert pointers == [keep_a2.ref, None, keep_c.ref]
        clock.now = start
        async with ledger_with(harness, clock=clock) as before:
            for kept in (keep_a, keep_a2, keep_c):
                assert (await before.checkpoints.get(kept.ref)).ref == kept.ref
            for gone in (gone_a, *gone_b, gone_c):
                with pytest.raises(NotFoundError):
                    await before.checkpoints.get(gone.ref)

    async def test_purge_expired_in_batches_removes_every_expired_one(
        self, harness: Harness
    ) -> None:
        clock = SettableClock()
        async with ledger_with(harness, clock=clock) as ledger:
            await ledger.sessions.create("run")
            for i in range(7):
                await ledger.checkpoints.save("run", state(i), ttl=HOUR)
            kept = await ledger.checkpoints.save("run", state("kept"))
            clock.advance(2 * HOUR)
            assert await ledger.checkpoints.purge_expired(batch=3) == 7
            assert await ledger.checkpoints.latest("run") == kept
            with pytest.raises(ValidationError):
                await ledger.checkpoints.purge_expired(batch=0)

    async def test_purge_expired_in_a_unit_of_work_rolls_back_with_it(
        self, harness: Harness
    ) -> None:
        clock = SettableClock()
        async with ledger_with(harness, clock=clock) as ledger:
            await ledger.sessions.create("run")
            brief = await ledger.checkpoints.save("run", EMPTY, ttl=HOUR)
            clock.advance(2 * HOUR)
            with pytest.raises(RuntimeError):
                async with ledger.unit_of_work() as uow:
                    assert await uow.checkpoints.purge_expired(batch=1) == 1
                    raise RuntimeError("boom")
            assert (await ledger.sessions.get("run")).latest_checkpoint_ref == brief.ref
            async with ledger.unit_of_work() as uow:
                assert await uow.checkpoints.purge_expired() == 1
            assert (await ledger.sessions.get("run")).latest_checkpoint_ref is None

    async def test_prune_counts_expired_ones_as_gone(self, harness: Harness) -> None:
        clock = SettableClock()
        async with ledger_with(harness, clock=clock) as ledger:
            await ledger.sessions.create("run")
            old = await ledger.checkpoints.save("run", state(1))
            await ledger.checkpoints.save("run", state(2))
            await ledger.checkpoints.save("run", state(3), ttl=HOUR)
            clock.advance(2 * HOUR)
            assert await ledger.checkpoints.prune("run", 1) == 2
            latest = await ledger.checkpoints.latest("run")
            assert latest is not None and latest.seq == 2
            assert (await ledger.sessions.get("run")).latest_checkpoint_ref == latest.ref
            with pytest.raises(NotFoundError):
                await ledger.checkpoints.get(old.ref)

    async def test_delete_removes_an_expired_checkpoint_too(self, harness: Harness) -> None:
        clock = SettableClock()
        async with ledger_with(harness, clock=clock) as ledger:
            await ledger.sessions.create("run")
            brief = await ledger.checkpoints.save("run", EMPTY, ttl=HOUR)
            clock.advance(2 * HOUR)
            await ledger.checkpoints.delete(brief.ref)
            assert (await ledger.sessions.get("run")).latest_checkpoint_ref is None
            assert await ledger.checkpoints.purge_expired() == 0


@tier("driver")
class CheckpointConcurrencyContract:
    """Concurrent resumers and savers of one session."""

    async def test_two_resumers_of_one_pause_exactly_one_wins(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("pause")
        paused = await harness.ledger.checkpoints.save("pause", state("paused"))
        barrier = harness.barrier(2)

        async def resumer(index: int) -> Checkpoint | str:
            await barrier.wait()
            try:
                saved: Checkpoint = await harness.ledger.checkpoints.save(
                    "pause", state(f"resumed by {index}"), parent=paused.ref
                )
            except ConflictError as error:
                return error.reason
            return saved

        results = await harness.concurrently(2, resumer)
        winners = [r for r in results if isinstance(r, Checkpoint)]
        assert sorted(r for r in results if isinstance(r, str)) == ["parent"]
        assert len(winners) == 1
        listed = (await harness.ledger.checkpoints.list("pause")).items
        assert [info.ref for info in listed] == [winners[0].ref, paused.ref]
        assert await harness.ledger.checkpoints.latest("pause") == winners[0]

    async def test_of_many_resumers_exactly_one_wins(self, harness: Harness) -> None:
        resumers = 8
        await harness.ledger.sessions.create("pause")
        paused = await harness.ledger.checkpoints.save("pause", state("paused"))
        barrier = harness.barrier(resumers)

        async def resumer(index: int) -> str:
            await barrier.wait()
            try:
                await harness.ledger.checkpoints.save("pause", state(index), parent=paused.ref)
            except ConflictError as error:
                return error.reason
            return "resumed"

        results = await harness.concurrently(resumers, resumer)
        assert sorted(results) == ["parent"] * (resumers - 1) + ["resumed"]
        assert (await harness.ledger.sessions.get("pause")).checkpoint_seq == 2

    async def test_concurrent_savers_get_contiguous_seqs_and_one_unbroken_lineage(
        self, harness: Harness
    ) -> None:
        writers, rounds = 4, 10
        await harness.ledger.sessions.create("busy")

        async def writer(index: int) -> None:
            for turn in range(rounds):
                await harness.ledger.checkpoints.save("busy", state(f"{index}:{turn}"))

        await harness.concurrently(writers, writer)
        listed = (await harness.ledger.checkpoints.list("busy", limit=1000)).items
        assert [info.seq for info in listed] == list(range(writers * rounds, 0, -1))
        chain = [info.parent_ref for info in listed]
        assert chain == [info.ref for info in listed[1:]] + [None]

    async def test_checkpoints_and_session_saves_never_conflict(self, harness: Harness) -> None:
        record = await harness.ledger.sessions.create("mixed", state={"n": 0})

        async def checkpointer(_: int) -> None:
            for turn in range(10):
                await harness.ledger.checkpoints.save("mixed", state(turn))

        async def saver(_: int) -> None:
            current = record
            for turn in range(10):
                current = await harness.ledger.sessions.save(
                    current.model_copy(update={"state": {"n": turn + 1}})
                )

        async def either(index: int) -> None:
            await (checkpointer if index == 0 else saver)(index)

        await harness.concurrently(2, either)
        final = await harness.ledger.sessions.get("mixed")
        assert (final.revision, final.state, final.checkpoint_seq) == (11, {"n": 10}, 10)


__all__ = [
    "CheckpointConcurrencyContract",
    "CheckpointContract",
    "CheckpointExpiryContract",
]
