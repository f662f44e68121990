"""A stored checkpoint payload that does not decode raises CorruptRecordError naming the
checkpoint: never None, never skipped in favour of an older one."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from agentledger import AsyncLedger, CheckpointPayload, Ledger, migrations
from agentledger.errors import CorruptRecordError, DatabaseError
from agentledger.records import PendingToolCall

pytestmark = pytest.mark.sqlite


def _corrupt(url: str, ref: str, payload: str) -> None:
    with Ledger(url) as ledger, ledger.engine.begin() as connection:  # an out-of-band writer
        connection.execute(
            text("UPDATE agentledger_checkpoints SET payload = :payload WHERE ref = :ref"),
            {"payload": payload, "ref": ref},
        )


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/corrupt.db"
    migrations.upgrade(url)
    return url


def _two_checkpoints(url: str) -> tuple[str, str]:
    with Ledger(url) as ledger:
        ledger.sessions.create("hurt")
        older = ledger.checkpoints.save("hurt", CheckpointPayload(runtime_state={"n": 1}))
        newer = ledger.checkpoints.save("hurt", CheckpointPayload(runtime_state={"n": 2}))
    return older.ref, newer.ref


@pytest.mark.parametrize(
    "stored",
    ['{"context_window": [', '{"colour": "red"}', "[]", '{"context_window": [{"role": ""}]}'],
    ids=["not-json", "unknown-field", "not-an-object", "invalid-message"],
)
def test_a_corrupt_payload_names_the_checkpoint(url: str, stored: str) -> None:
    _, newer = _two_checkpoints(url)
    _corrupt(url, newer, stored)
    with Ledger(url) as ledger:
        with pytest.raises(CorruptRecordError) as raised:
            ledger.checkpoints.get(newer)
        error = raised.value
        assert (error.table, error.key, error.column) == (
            "agentledger_checkpoints",
            newer,
            "payload",
        )
        assert newer in str(error)
        assert isinstance(error, DatabaseError)
        with pytest.raises(CorruptRecordError):
            ledger.checkpoints.latest("hurt")
        assert ledger.checkpoints.list("hurt").items[0].ref == newer


async def test_a_corrupt_latest_is_reported_on_the_async_api_not_skipped(url: str) -> None:
    older, newer = _two_checkpoints(url)
    _corrupt(url, newer, "nope")
    async with AsyncLedger(url) as ledger:
        with pytest.raises(CorruptRecordError) as raised:
            await ledger.checkpoints.latest("hurt")
        assert raised.value.key == newer
        assert (await ledger.checkpoints.get(older)).payload.runtime_state == {"n": 1}


@pytest.mark.parametrize(
    "stored",
    [
        '{"context_window": [{"role": "user", "content": "hi", "metadata": {},'
        ' "created_at": "2026-01-01T00:00:00Z", "external_key": "k"}]}',
        '{"runtime_state": {"n": 3}}',
        '{"pending_tool_calls": {"c": {"tool_call": {"id": "c"}}}, "interrupt_requesters": {}}',
    ],
    ids=["message-with-time-and-key", "some-fields", "tool-call-without-flag"],
)
def test_a_payload_in_another_form_is_validated_as_a_whole(url: str, stored: str) -> None:
    """Only the form ``save`` writes is read back without validation; another writer's
    form of a valid payload comes back as pydantic validates it."""
    _, newer = _two_checkpoints(url)
    _corrupt(url, newer, stored)
    with Ledger(url) as ledger:
        payload = ledger.checkpoints.get(newer).payload
    assert payload == CheckpointPayload.model_validate_json(stored)
    assert payload.model_dump() == CheckpointPayload.model_validate_json(stored).model_dump()


@pytest.mark.parametrize(
    "stored",
    [
        '{"context_window": [{"role": "' + "r" * 256 + '", "content": null, "metadata": {}}],'
        ' "pending_tool_calls": {}, "interrupt_requesters": {}, "runtime_state": {},'
        ' "pending_interrupts": null, "resolved_interrupts": null}',
        '{"context_window": [{"role": "user", "content": null, "metadata": []}],'
        ' "pending_tool_calls": {}, "interrupt_requesters": {}, "runtime_state": {},'
        ' "pending_interrupts": null, "resolved_interrupts": null}',
        '{"context_window": [], "pending_tool_calls": {"c": {"tool_call": [],'
        ' "interrupt_active": false}}, "interrupt_requesters": {}, "runtime_state": {},'
        ' "pending_interrupts": null, "resolved_interrupts": null}',
        '{"context_window": [], "pending_tool_calls": {}, "interrupt_requesters": {"i": 1},'
        ' "runtime_state": {}, "pending_interrupts": null, "resolved_interrupts": null}',
        '{"context_window": [], "pending_tool_calls": {}, "interrupt_requesters": {},'
        ' "runtime_state": [], "pending_interrupts": null, "resolved_interrupts": null}',
    ],
    ids=["role-too-long", "metadata-not-object", "tool-call-not-object", "requester-not-str",
         "runtime-state-not-object"],
)  # fmt: skip
def test_a_payload_in_the_stored_form_breaking_a_rule_is_corrupt(url: str, stored: str) -> None:
    """The form ``save`` writes is still held to every rule of its fields."""
    _, newer = _two_checkpoints(url)
    _corrupt(url, newer, stored)
    with Ledger(url) as ledger, pytest.raises(CorruptRecordError) as raised:
        ledger.checkpoints.get(newer)
    assert raised.value.key == newer


def test_a_saved_payload_reads_back_equal_in_every_field(url: str) -> None:
    """What ``save`` returned, ``get`` and ``latest`` give back equal, field for field."""
    payload = CheckpointPayload.model_validate(
        {
            "context_window": [
                {"role": "user", "content": {"parts": ["a", 1, None]}, "metadata": {"m": [1.5]}},
                {"role": "assistant", "content": None},
            ],
            "pending_tool_calls": {
                "c1": {"tool_call": {"id": "c1", "args": {}}, "interrupt_active": True},
                "c2": {"tool_call": {}},
            },
            "interrupt_requesters": {"i1": "node"},
            "runtime_state": {"step": 7, "nested": {"x": [True, -0.0, 2**70]}},
            "pending_interrupts": [{"id": "i1"}],
            "resolved_interrupts": "done",
        }
    )
    with Ledger(url) as ledger:
        ledger.sessions.create("whole")
        saved = ledger.checkpoints.save("whole", payload)
        for read in (ledger.checkpoints.get(saved.ref), ledger.checkpoints.latest("whole")):
            assert read == saved
            assert read is not None and read.payload == payload
            assert read.model_dump() == saved.model_dump()
            assert read.payload.model_dump_json() == payload.model_dump_json()
            assert isinstance(read.payload.pending_tool_calls["c1"], PendingToolCall)
