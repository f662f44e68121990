"""Limits are enforced before any write, per value and per row."""

from __future__ import annotations

import pytest

from agentledger import Ledger, Limits, NewMessage, NewStep, ValidationError

from ..databases import dialect_params, scratch_database

SMALL = Limits(max_value_bytes=1000, max_checkpoint_bytes=2000, max_depth=8)


@pytest.fixture
def ledger() -> Ledger:
    ledger = Ledger.in_memory(limits=SMALL)
    ledger.sessions.create("s")
    return ledger


def test_step_fields_at_the_limit_together_are_refused_as_a_row(ledger: Ledger) -> None:
    half = "x" * 450
    ledger.steps.append("s", NewStep(input=half, output=half))  # 904 bytes with quotes
    with pytest.raises(ValidationError) as raised:
        ledger.steps.append("s", NewStep(input=half, output=half, tool_calls=half))
    assert "input, output, tool_calls, error together" in str(raised.value)
    assert ledger.steps.count("s") == 1


def test_a_long_step_error_counts_toward_the_row(ledger: Ledger) -> None:
    with pytest.raises(ValidationError):
        ledger.steps.append("s", NewStep(output="x" * 600, error="e" * 600))


def test_a_step_error_with_a_lone_surrogate_is_refused(ledger: Ledger) -> None:
    with pytest.raises(ValidationError) as raised:
        ledger.steps.append("s", NewStep(error="bad \ud800"))
    assert "steps[0].error" in str(raised.value)


def test_message_content_and_metadata_share_the_row_limit(ledger: Ledger) -> None:
    record = ledger.sessions.get("s")
    message = NewMessage(role="user", content="x" * 600, metadata={"note": "y" * 600})
    with pytest.raises(ValidationError) as raised:
        ledger.messages.append(record, message)
    assert "content, metadata together" in str(raised.value)
    assert ledger.messages.all("s") == []


def test_state_over_the_value_limit_is_refused(ledger: Ledger) -> None:
    record = ledger.sessions.get("s")
    with pytest.raises(ValidationError) as raised:
        ledger.sessions.save(record.model_copy(update={"state": {"big": "x" * 1000}}))
    assert "over the limit of 1,000 bytes" in str(raised.value)


def test_nesting_over_the_depth_limit_is_refused(ledger: Ledger) -> None:
    deep: object = 1
    for _ in range(9):
        deep = [deep]
    with pytest.raises(ValidationError) as raised:
        ledger.sessions.create("deep", state={"d": deep})
    assert "nesting deeper than 8" in str(raised.value)


@pytest.mark.parametrize("dialect", dialect_params())
def test_a_row_at_the_default_limit_is_stored_even_with_worst_case_escaping(
    dialect: str, tmp_path: object
) -> None:
    # JSON text of mostly quotes and backslashes doubles again when the driver escapes it.
    limit = Limits().max_value_bytes
    third = limit // 3
    field = '"\\' * ((third - 2) // 4)  # json.dumps doubles each character
    with scratch_database(dialect, str(tmp_path)) as url, Ledger(url) as server:
        server.upgrade()
        server.sessions.create("big")
        server.steps.append("big", NewStep(input=field, output=field, tool_calls=field))
        assert server.steps.last("big", 1)[0].input == field
        with pytest.raises(ValidationError):
            server.steps.append(
                "big", NewStep(input=field + "x" * third, output=field, tool_calls=field)
            )
        assert server.steps.count("big") == 1


def test_token_counts_beyond_64_bits_are_refused_before_any_write(ledger: Ledger) -> None:
    from agentledger import TokenUsage

    with pytest.raises(ValidationError):
        ledger.steps.append("s", {"usage": {"input_tokens": 2**64}})
    near = TokenUsage(input_tokens=2**62, total_tokens=2**62)
    with pytest.raises(ValidationError) as raised:
        ledger.steps.append("s", [NewStep(usage=near), NewStep(usage=near)])
    assert "2**63 - 1" in str(raised.value)
    assert ledger.steps.count("s") == 0
