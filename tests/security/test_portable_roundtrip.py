"""Generated values, each tried once on every database, then carried between every pair
of databases by export/import and by copy: the same value is stored and read back
identically everywhere (the same JSON text, key order and ``-0.0`` included), or
refused with the same ValidationError everywhere."""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agentledger import Ledger, NewMessage, SessionSelection, ValidationError
from agentledger._json import jsonb_form

from ..databases import DIALECTS, migrated, scratch_database

_ids = itertools.count()
EDGE_NUMBERS = [-0.0, 0.0, 1.0, 5e-324, 1e-300, 0.1 + 0.2, 1e15, 2**63 - 1, -(2**63), 2**64]
EDGE_TEXT = ["", "🚀" * 3, "e\u0301", "\u202e", "日本語", "\ufeff", "a\x00b", "\ud800", "\x1b[2J"]


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for level in range(depth):
        value = [value] if level % 2 else {"d": value}
    return value


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(EDGE_NUMBERS),
    st.text(max_size=12),
    st.sampled_from(EDGE_TEXT),
)
values = st.one_of(
    st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(st.one_of(st.text(max_size=6), st.sampled_from(EDGE_TEXT)), children)
        ),
        max_leaves=8,
    ),
    st.integers(min_value=28, max_value=33).map(nested),
)


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Ledger]]:
    """One ledger per database, each on a fresh scratch database."""
    with ExitStack() as stack:
        found = {}
        for dialect in DIALECTS:
            url = stack.enter_context(
                scratch_database(dialect, str(tmp_path_factory.mktemp(dialect)))
            )
            found[dialect] = stack.enter_context(Ledger(migrated(url)))
        yield found


def text(value: Any) -> str:
    """A value's exact JSON text: key order and -0.0 count."""
    return json.dumps(value, ensure_ascii=False)


def store(ledger: Ledger, id: str, value: Any) -> str:
    """Store ``value`` as state, content and metadata of session ``id``; what is read
    back, or the path of the refusal."""
    try:
        record = ledger.sessions.create(id, state={"v": value})
        ledger.messages.append(
            record, NewMessage(role="user", content=value, metadata={"m": value})
        )
    except ValidationError as error:
        assert not ledger.sessions.exists(id) or ledger.messages.all(id) == []
        return f"refused at {error.path}"
    return read(ledger, id)


def read(ledger: Ledger, id: str) -> str:
    (message,) = ledger.messages.all(id)
    return text([ledger.sessions.get(id).state, message.content, message.metadata])


def carried(source: Ledger, target: Ledger, id: str) -> list[str]:
    """The session read back on ``target`` after an export/import, then after a copy."""
    selection = SessionSelection(session_ids=[id])
    file = io.StringIO()
    source.transfer.export_jsonl(file, selection=selection)
    target.transfer.import_jsonl(io.BytesIO(file.getvalue().encode()))
    after_import = read(target, id)
    target.sessions.delete(id)
    source.transfer.copy_to(target, selection=selection)
    after_copy = read(target, id)
    target.sessions.delete(id)
    return [after_import, after_copy]


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(value=values)
def test_a_value_behaves_the_same_on_every_database_and_between_them(
    ledgers: dict[str, Ledger], value: Any
) -> None:
    n = next(_ids)
    outcomes = {name: store(ledger, f"rt-{n}-{name}", value) for name, ledger in ledgers.items()}
    assert len(set(outcomes.values())) == 1, outcomes
    (outcome,) = set(outcomes.values())
    event("refused" if outcome.startswith("refused") else "stored and carried")
    if outcome.startswith("refused"):
        return
    assert outcome == text([jsonb_form({"v": value}), value, {"m": value}])
    for (a, source), (b, target) in itertools.permutations(ledgers.items(), 2):
        assert carried(source, target, f"rt-{n}-{a}") == [outcome, outcome], (a, b)
