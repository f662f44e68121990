"""JSON validation: what is accepted is stored exactly; the rest names its path."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

import pytest

from agentledger import Limits, ValidationError
from agentledger._json import check_json, check_object, loads

LIMITS = Limits()


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -1,
        2**63 - 1,
        2**70,
        -0.0,
        1.5e300,
        "",
        "ünïcødé ✓ 🚀",
        [],
        {},
        {"nested": [{"a": [1, 2, {"b": None}]}]},
    ],
    ids=repr,
)
def test_plain_json_is_accepted_and_round_trips(value: Any) -> None:
    text = check_json(value, path="v", limits=LIMITS)
    assert json.loads(text) == value


@pytest.mark.parametrize(
    ("value", "path"),
    [
        (float("nan"), "v"),
        (float("inf"), "v"),
        ({"a": [1, float("-inf")]}, "v['a'][1]"),
        ({"a": "x\x00y"}, "v['a']"),
        ({"a": "lone \ud800 surrogate"}, "v['a']"),
        ({1: "int key"}, "v"),
        ({"s": {1, 2}}, "v['s']"),
        ({"t": (1, 2)}, "v['t']"),
        ({"d": Decimal("1.5")}, "v['d']"),
        ({"b": b"bytes"}, "v['b']"),
        ([object()], "v[0]"),
    ],
    ids=repr,
)
def test_what_is_not_plain_json_is_refused_naming_the_path(value: Any, path: str) -> None:
    with pytest.raises(ValidationError) as raised:
        check_json(value, path="v", limits=LIMITS)
    assert raised.value.path == path
    assert path in str(raised.value)


def test_nesting_deeper_than_the_limit_is_refused_without_recursion_error() -> None:
    value: Any = []
    for _ in range(10_000):
        value = [value]
    with pytest.raises(ValidationError) as raised:
        check_json(value, path="v", limits=LIMITS)
    assert "nesting deeper than 31" in str(raised.value)


def test_nesting_at_the_limit_is_accepted() -> None:
    value: Any = 1
    for _ in range(31):
        value = [value]
    check_json(value, path="v", limits=LIMITS)


def test_a_value_over_the_size_limit_is_refused_with_its_size() -> None:
    small = Limits(max_value_bytes=100)
    check_json("x" * 98, path="v", limits=small)  # 100 bytes with the quotes
    with pytest.raises(ValidationError) as raised:
        check_json("x" * 99, path="v", limits=small)
    assert "101 bytes" in str(raised.value)


def test_size_counts_utf8_bytes_not_characters() -> None:
    small = Limits(max_value_bytes=10)
    check_json("xxxxxxxx", path="v", limits=small)  # 8 characters, 10 bytes with quotes
    with pytest.raises(ValidationError):
        check_json("ééééé", path="v", limits=small)  # 5 characters, 12 bytes with quotes


def test_state_must_be_an_object() -> None:
    with pytest.raises(ValidationError):
        check_object([1, 2], path="state", limits=LIMITS)


def test_a_pydantic_model_gets_a_hint() -> None:
    from agentledger import TokenUsage

    with pytest.raises(ValidationError) as raised:
        check_json({"usage": TokenUsage()}, path="state", limits=LIMITS)
    assert "model_dump" in str(raised.value)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10"])
def test_limits_must_be_positive_ints(bad: Any) -> None:
    with pytest.raises(ValidationError):
        Limits(max_depth=bad)


def test_state_refuses_floats_jsonb_would_turn_into_integers() -> None:
    check_json({"n": 9.99e15}, path="state", limits=LIMITS, jsonb=True)
    check_json({"n": 10**20}, path="state", limits=LIMITS, jsonb=True)  # ints are exact
    with pytest.raises(ValidationError) as raised:
        check_json({"n": 4.705309337947274e16}, path="state", limits=LIMITS, jsonb=True)
    assert raised.value.path == "state['n']"
    check_json({"n": 4.705309337947274e16}, path="content", limits=LIMITS)  # JSON text


@pytest.mark.parametrize(
    "text",
    [
        '"plain"',
        '{"a": [1, 2.5, null, true]}',
        "  [1]  ",  # whitespace around the value
        "\ufeff{}",  # a byte-order mark
        "NaN",
        b'{"bytes": 1}',
        '{"a": 1} extra',
        "{broken",
        "",
    ],
)
def test_loads_gives_what_json_loads_gives_value_or_error(text: str | bytes) -> None:
    try:
        expected: object = json.loads(text)
    except ValueError as error:
        with pytest.raises(type(error), match=re.escape(str(error))):
            loads(text)  # type: ignore[arg-type]
        return
    assert repr(loads(text)) == repr(expected)  # type: ignore[arg-type]
