"""One rulebook for values on every database: a value is stored and read back equal on
SQLite, PostgreSQL and MariaDB alike, or refused with agentledger's ValidationError
naming the field and the limit before any SQL; never a raw exception."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from typing import Any

import pydantic
import pytest
from sqlalchemy import event
from sqlalchemy.engine import URL

from agentledger import (
    AgentLedgerError,
    AsyncLedger,
    Ledger,
    Limits,
    NewMessage,
    NewStep,
    RecordValidationError,
    RunSummary,
    TokenUsage,
    ValidationError,
)

_ids = itertools.count()
_ASYNC_DRIVER = {"sqlite": "aiosqlite", "postgresql": "asyncpg", "mysql": "aiomysql"}
BIG = 2**63 - 1
HOSTILE_TEXT = ["\ud800", "a\x00b"]


@pytest.fixture(scope="module")
def ledger(migrated_url: URL) -> Iterator[Ledger]:
    with Ledger(migrated_url) as ledger:
        yield ledger


def fresh(ledger: Ledger) -> str:
    return ledger.sessions.create(f"portable-{next(_ids)}").id


def nested(depth: int) -> Any:
    """``depth`` lists and objects, one inside the other, around a string."""
    value: Any = "bottom"
    for level in range(depth):
        value = [value] if level % 2 else {"d": value}
    return value


def refused_before_sql(ledger: Ledger, call: Any, match: str) -> ValidationError:
    sent: list[str] = []
    listener = lambda *args: sent.append(args[2])  # noqa: E731
    event.listen(ledger.engine, "before_cursor_execute", listener)
    try:
        with pytest.raises(ValidationError, match=match) as raised:
            call()
    finally:
        event.remove(ledger.engine, "before_cursor_execute", listener)
    assert sent == [], f"SQL was sent before the refusal: {sent}"
    return raised.value


# --- records ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "path", "problem"),
    [
        (lambda: NewMessage(role="x" * 300), "NewMessage.role", "at most 255 characters"),
        (lambda: TokenUsage(input_tokens=-1), "TokenUsage.input_tokens", "greater than or equal"),
        (lambda: NewMessage(role="u", metadata={1: 2}), "NewMessage.metadata[1]", "valid string"),
        (lambda: NewStep(model="\ud800"), "NewStep.model", "unicode"),
        (lambda: NewStep(step_index=2**31), "NewStep.step_index", "2147483647"),
        (lambda: RunSummary.model_validate({"status": "won"}), "RunSummary.status", "status"),
    ],
)
def test_a_record_built_from_bad_values_raises_agentledgers_error_naming_the_field(
    build: Any, path: str, problem: str
) -> None:
    with pytest.raises(RecordValidationError) as raised:
        build()
    error = raised.value
    assert isinstance(error, ValidationError) and isinstance(error, AgentLedgerError)
    assert error.path is not None and error.path.startswith(path)
    assert path in str(error) and problem in str(error)
    assert "\n" not in str(error)


def test_a_record_error_is_still_pydantics_error_with_its_details() -> None:
    with pytest.raises(pydantic.ValidationError) as raised:
        NewMessage(role="")
    assert isinstance(raised.value, ValueError)
    assert raised.value.errors()[0]["type"] == "string_too_short"


# --- nesting depth ------------------------------------------------------------------------


def test_the_depth_limit_is_what_every_database_stores() -> None:
    assert Limits().max_depth == 31
    with pytest.raises(ValidationError, match=r"Limits\.max_depth must be an int from 1 to 31"):
        Limits(max_depth=32)


def test_a_value_31_levels_deep_is_stored_and_read_back_equal(ledger: Ledger) -> None:
    id = fresh(ledger)
    ledger.messages.append(id, NewMessage(role="user", content=nested(31)))
    ledger.sessions.save(ledger.sessions.get(id).model_copy(update={"state": nested(31)}))
    assert ledger.messages.all(id)[0].content == nested(31)
    assert ledger.sessions.get(id).state == nested(31)


def test_a_value_32_levels_deep_is_refused_naming_the_field_and_the_limit(ledger: Ledger) -> None:
    id = fresh(ledger)
    error = refused_before_sql(
        ledger,
        lambda: ledger.messages.append(id, NewMessage(role="user", content=nested(32))),
        "nesting deeper than 31 levels",
    )
    assert error.path is not None and error.path.startswith("messages[0].content")
    deep_state = {"v": nested(31)}
    refused_before_sql(
        ledger, lambda: ledger.sessions.create(f"deep-{next(_ids)}", state=deep_state), "31"
    )
    assert ledger.messages.all(id) == []


# --- text ---------------------------------------------------------------------------------


@pytest.mark.parametrize("text", HOSTILE_TEXT, ids=["surrogate", "nul"])
def test_text_no_database_stores_alike_is_refused_in_every_text_field(
    ledger: Ledger, text: str
) -> None:
    id = fresh(ledger)
    refused_before_sql(ledger, lambda: ledger.grants.grant(id, "c", granted_by=text), "granted_by")
    refused_before_sql(
        ledger, lambda: ledger.sessions.create(f"t-{next(_ids)}", title=text), "title"
    )
    refused_before_sql(ledger, lambda: ledger.steps.usage(model=text), "model")
    with pytest.raises(ValidationError, match="model"):
        ledger.steps.append(id, NewStep(model=text))
    with pytest.raises(ValidationError, match=r"(?i)summary.*model"):
        ledger.sessions.finalize(id, RunSummary(status="completed", model=text))
    assert ledger.grants.active(id) == [] and ledger.steps.count(id) == 0


# --- integers -----------------------------------------------------------------------------


@pytest.mark.parametrize("seq", [2**31, 2**63])
def test_a_seq_no_driver_binds_is_refused_naming_it(ledger: Ledger, seq: int) -> None:
    id = fresh(ledger)
    refused_before_sql(ledger, lambda: ledger.messages.window(id, after_seq=seq), "after_seq")
    refused_before_sql(ledger, lambda: ledger.steps.window(id, after_seq=seq), "after_seq")


def test_an_async_ledger_refuses_the_same_seq_on_every_driver(migrated_url: URL) -> None:
    url = migrated_url.set(
        drivername=f"{migrated_url.get_backend_name()}+{_ASYNC_DRIVER[migrated_url.get_backend_name()]}"
    )

    async def scenario() -> None:
        async with AsyncLedger(url) as ledger:
            id = (await ledger.sessions.create(f"async-{next(_ids)}")).id
            assert await ledger.messages.window(id, after_seq=2**31 - 1) == []
            with pytest.raises(ValidationError, match="after_seq must be an int from 0 to"):
                await ledger.messages.window(id, after_seq=2**31)

    asyncio.run(scenario())


def test_an_edited_record_with_a_revision_no_driver_binds_is_refused(ledger: Ledger) -> None:
    record = ledger.sessions.get(fresh(ledger))
    edited = record.model_copy(update={"revision": 2**63})
    refused_before_sql(ledger, lambda: ledger.sessions.save(edited), "record.revision")
    refused_before_sql(
        ledger, lambda: ledger.messages.append(edited, NewMessage(role="u")), "record.revision"
    )


def test_token_totals_past_a_bigint_are_summed_exactly(ledger: Ledger) -> None:
    step = NewStep(usage=TokenUsage(input_tokens=BIG, total_tokens=BIG))
    user = f"tokens-{next(_ids)}"
    for _ in range(3):
        ledger.steps.append(ledger.sessions.create(f"t-{next(_ids)}", user_id=user).id, step)
    totals = ledger.steps.usage(user_id=user)
    assert (totals.input_tokens, totals.output_tokens, totals.total_tokens) == (3 * BIG, 0, 3 * BIG)


def test_a_step_taking_a_session_past_a_bigint_is_refused_and_not_stored(ledger: Ledger) -> None:
    id = fresh(ledger)
    ledger.steps.append(id, NewStep(usage=TokenUsage(input_tokens=BIG)))
    with pytest.raises(ValidationError, match="past 2\\*\\*63 - 1"):
        ledger.steps.append(id, NewStep(usage=TokenUsage(input_tokens=1)))
    assert ledger.steps.count(id) == 1
    assert ledger.sessions.get(id).input_tokens == BIG


# --- state in JSONB's form ------------------------------------------------------------------


def test_state_reads_back_in_jsonb_form_on_every_database(ledger: Ledger) -> None:
    given = {"bb": 1, "a": -0.0, "ü": [-0.0, {"zz": 1, "y": 2}], "ab": 3}
    id = f"form-{next(_ids)}"
    written = ledger.sessions.create(id, state=given).state
    read = ledger.sessions.get(id).state
    for state in (written, read):
        assert list(state) == ["a", "ab", "bb", "ü"]
        assert list(state["ü"][1]) == ["y", "zz"]
        assert str(state["a"]) == "0.0" and str(state["ü"][0]) == "0.0"
    assert read == written == given


# --- empty appends ------------------------------------------------------------------------


def test_an_empty_append_is_refused_for_messages_as_for_steps(ledger: Ledger) -> None:
    id = fresh(ledger)
    revision = ledger.sessions.get(id).revision
    refused_before_sql(ledger, lambda: ledger.messages.append(id, []), "at least one message")
    refused_before_sql(ledger, lambda: ledger.steps.append(id, []), "at least one step")
    assert ledger.sessions.get(id).revision == revision
    changed = ledger.messages.append(id, [], state_delta={"set": {"k": 1}})
    assert changed.session.state == {"k": 1}
