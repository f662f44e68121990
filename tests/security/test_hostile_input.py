"""Hostile input, property-based: every value is stored and read back equal, or refused
with an AgentLedgerError before any SQL; never a driver error, never RecursionError,
never a partial write."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import event, func, select

from agentledger import (
    AgentLedgerError,
    InvalidIdError,
    Ledger,
    Limits,
    NewMessage,
    NewStep,
    ValidationError,
)
from agentledger.models import AgentMessage, AgentSession, AgentStep

from ..databases import dialect_params, migrated, scratch_database

LIMITS = Limits(max_value_bytes=4096, max_depth=24)
EXAMPLES = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
HOSTILE_TEXT = [
    "",
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udfffy",
    "%s",
    "?",
    ":p",
    "'; DROP TABLE agentledger_sessions;--",
    '"\\',
    "\u202eevil",
    "🚀" * 10,
    "x" * 4090,
    "x" * 4100,
]
HOSTILE_IDS = [
    "",
    "x" * 128,
    "x" * 129,
    ".leading-dot",
    "\uff33ession",  # a fullwidth S
    "a\x00b",
    "quote'",
    'dq"',
    "semi;colon",
    "%s",
    "?",
    ":p",
    "a/b",
    "a\\b",
    "\u202eabc",
    "ok-id_1.2",
]
NOT_JSON = [set(), (1, 2), b"bytes", Decimal("1.5"), object(), datetime(2026, 1, 1), frozenset()]
ID_RULE = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9_.\-]{0,127}")

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(HOSTILE_TEXT),
    st.sampled_from(NOT_JSON),
)
keys = st.one_of(st.text(max_size=10), st.sampled_from(["\x00", "\ud800", "k"]), st.integers())


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for level in range(depth):
        value = [value] if level % 2 else {"d": value}
    return value


json_values = st.one_of(
    st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4)
        ),
        max_leaves=12,
    ),
    st.integers(min_value=20, max_value=3000).map(nested),
)
_ids = itertools.count()


@pytest.fixture(scope="module", params=dialect_params())
def ledger(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Ledger]:
    with scratch_database(request.param, str(tmp_path_factory.mktemp("hostile"))) as url:
        migrated(url)
        with Ledger(url, limits=LIMITS) as ledger:
            ledger.sessions.create("host")
            yield ledger


def counts(ledger: Ledger) -> tuple[int, int, int]:
    with ledger.engine.connect() as connection:
        return tuple(  # type: ignore[return-value]
            connection.execute(select(func.count()).select_from(model)).scalar_one()
            for model in (AgentSession, AgentMessage, AgentStep)
        )


def refused_without_sql(ledger: Ledger, call: Any) -> BaseException:
    """Run ``call``; it must raise an AgentLedgerError having sent no SQL at all."""
    sent: list[str] = []
    listener = lambda *args: sent.append(args[2])  # noqa: E731
    event.listen(ledger.engine, "before_cursor_execute", listener)
    try:
        with pytest.raises(AgentLedgerError) as raised:
            call()
    finally:
        event.remove(ledger.engine, "before_cursor_execute", listener)
    assert sent == [], f"SQL was sent before the refusal: {sent}"
    return raised.value


def stored_or_refused(ledger: Ledger, write: Any, read: Any, expected: Any) -> None:
    before = counts(ledger)
    try:
        write()
    except ValidationError:
        assert counts(ledger) == before, "a refused write left rows behind"
        error = refused_without_sql(ledger, write)
        assert isinstance(error, ValidationError)
        return
    assert read() == expected


@EXAMPLES
@given(value=st.one_of(st.text(max_size=140), st.sampled_from(HOSTILE_IDS)))
def test_a_session_id_is_stored_exactly_or_refused_before_any_sql(
    ledger: Ledger, value: str
) -> None:
    if ID_RULE.fullmatch(value) and not ledger.sessions.exists(value):
        assert ledger.sessions.create(value).id == value
        assert ledger.sessions.get(value).id == value
        ledger.sessions.delete(value)
    elif not ID_RULE.fullmatch(value):
        error = refused_without_sql(ledger, lambda: ledger.sessions.create(value))
        assert isinstance(error, InvalidIdError)
        refused_without_sql(ledger, lambda: ledger.sessions.get(value))


@EXAMPLES
@given(value=json_values)
def test_state_is_stored_exactly_or_refused(ledger: Ledger, value: Any) -> None:
    id = f"state-{next(_ids)}"
    stored_or_refused(
        ledger,
        lambda: ledger.sessions.create(id, state={"v": value}),
        lambda: ledger.sessions.get(id).state,
        {"v": value},
    )


@EXAMPLES
@given(value=json_values)
def test_message_content_is_stored_exactly_or_refused(ledger: Ledger, value: Any) -> None:
    record = ledger.sessions.create(f"messages-{next(_ids)}")
    stored_or_refused(
        ledger,
        lambda: ledger.messages.append(record, NewMessage(role="user", content=value)),
        lambda: [m.content for m in ledger.messages.all(record.id)],
        [value],
    )


@EXAMPLES
@given(value=json_values, metadata=json_values)
def test_step_payloads_are_stored_exactly_or_refused(
    ledger: Ledger, value: Any, metadata: Any
) -> None:
    id = f"steps-{next(_ids)}"
    ledger.sessions.create(id)
    stored_or_refused(
        ledger,
        lambda: ledger.steps.append(id, NewStep(input=value, output=metadata, tool_calls=[value])),
        lambda: [(s.input, s.output, s.tool_calls) for s in ledger.steps.last(id, 5)],
        [(value, metadata, [value])],
    )


@pytest.fixture(scope="module")
def every_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Ledger]]:
    """One ledger per available dialect, each on a scratch database."""
    with ExitStack() as stack:
        ledgers = {}
        for dialect in ("sqlite", "postgresql", "mysql"):
            try:
                url = stack.enter_context(
                    scratch_database(dialect, str(tmp_path_factory.mktemp(dialect)))
                )
            except pytest.skip.Exception:
                continue
            ledgers[dialect] = stack.enter_context(Ledger(migrated(url), limits=LIMITS))
        yield ledgers


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=json_values)
def test_a_value_accepted_on_one_backend_reads_back_the_same_on_all(
    every_backend: dict[str, Ledger], value: Any
) -> None:
    read_back = []
    for ledger in every_backend.values():
        record = ledger.sessions.create(f"cross-{next(_ids)}")
        try:
            ledger.messages.append(record, NewMessage(role="user", content=value))
        except ValidationError:
            read_back.append("refused")
            continue
        read_back.append(ledger.messages.all(record.id)[0].content)
    assert all(item == read_back[0] for item in read_back), read_back


def test_tables_are_intact_after_the_hostile_input(ledger: Ledger) -> None:
    assert ledger.sessions.get("host").id == "host"
    ledger.sessions.create("after-hostile", state={"at": datetime.now(UTC).isoformat()})
    assert ledger.sessions.exists("after-hostile")
