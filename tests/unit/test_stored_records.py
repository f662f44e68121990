"""Records built from stored values: equal to validated ones, built with the cyclic
collector paused and the collector's switch left as the application set it."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from agentledger.errors import CorruptRecordError
from agentledger.records import Message, collector_paused, from_stored, stored_maker
from agentledger.repositories.messages import messages_of

AT = datetime(2026, 12, 7, 16, 0, tzinfo=UTC)
VALUES = {
    "seq": 1,
    "role": "user",
    "content": {"text": "hi"},
    "metadata": {},
    "created_at": AT,
    "external_key": None,
}


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    gc.enable() if was else gc.disable()


def test_a_stored_record_equals_the_validated_one() -> None:
    made = stored_maker(Message)(dict(VALUES))
    assert made == Message(**VALUES)
    assert made.model_dump() == Message(**VALUES).model_dump()
    assert from_stored(Message, dict(VALUES)) == made


def test_a_stored_record_is_edited_by_copy_like_any_other() -> None:
    made = from_stored(Message, dict(VALUES))
    edited = made.model_copy(update={"role": "assistant"})
    assert (made.role, edited.role) == ("user", "assistant")
    assert edited.model_fields_set == made.model_fields_set


@pytest.mark.usefixtures("collector_on")
def test_the_collector_is_paused_while_records_are_built_and_on_again_after() -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_on")
def test_the_collector_is_on_again_after_a_build_that_raised() -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("a corrupt row")
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_on")
def test_a_collector_the_application_turned_off_stays_off() -> None:
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


@pytest.mark.usefixtures("collector_on")
def test_a_corrupt_row_among_many_raises_and_leaves_the_collector_on() -> None:
    rows = [(seq, "user", '{"text": "hi"}', "{}", AT, None) for seq in range(1, 1000)]
    rows.append((1000, "user", '{"text": ', "{}", AT, None))
    with pytest.raises(CorruptRecordError, match="1000"):
        messages_of(rows, "s")
    assert gc.isenabled()


def test_messages_of_rows_are_the_stored_messages_in_order() -> None:
    rows = [(seq, "user", f'{{"n": {seq}}}', '{"k": 1}', AT, None) for seq in (1, 2)]
    assert messages_of(rows, "s") == [
        Message(seq=1, role="user", content={"n": 1}, metadata={"k": 1}, created_at=AT),
        Message(seq=2, role="user", content={"n": 2}, metadata={"k": 1}, created_at=AT),
    ]
