"""The small rules every argument and cursor goes through (agentledger._checks)."""

from __future__ import annotations

import itertools

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, insert, select

from agentledger import ValidationError
from agentledger._checks import after_keyset, bounded_int, decode_cursor, encode_cursor


@pytest.mark.parametrize("value", [True, 1.0, "3", None, -1, 11])
def test_an_int_out_of_its_range_or_not_an_int_is_refused_naming_it(value: object) -> None:
    with pytest.raises(ValidationError, match="limit must be an int from 0 to 10") as raised:
        bounded_int(value, "limit", high=10)
    assert raised.value.path == "limit"


def test_an_int_in_range_is_returned() -> None:
    assert bounded_int(10, "limit", low=1, high=10) == 10
    assert bounded_int(2**31 - 1, "seq") == 2**31 - 1


@pytest.mark.parametrize("value", [2**31, 2**63, 2**70])
def test_an_int_no_driver_binds_against_an_integer_column_is_refused(value: int) -> None:
    with pytest.raises(ValidationError, match="seq must be an int from 0 to 2,147,483,647"):
        bounded_int(value, "seq")


def test_a_cursor_round_trips_for_the_same_binding() -> None:
    cursor = encode_cursor(["2026-01-01T00:00:00+00:00", "s1"], ["app", None])
    assert decode_cursor(cursor, ["app", None], what="x") == ["2026-01-01T00:00:00+00:00", "s1"]


@pytest.mark.parametrize(
    "tamper",
    [
        lambda c: c[:-1] + ("0" if c[-1] != "0" else "1"),
        lambda c: "A" + c,
        lambda c: c.replace(".", ""),
        lambda c: c + "." + c,
        lambda c: "x" * 2000,
    ],
)
def test_a_tampered_cursor_is_refused(tamper: object) -> None:
    cursor = encode_cursor([5], "session-a")
    with pytest.raises(ValidationError, match="the same listing"):
        decode_cursor(tamper(cursor), "session-a", what="the same listing")  # type: ignore[operator]


def test_a_cursor_from_another_binding_is_refused() -> None:
    with pytest.raises(ValidationError):
        decode_cursor(encode_cursor([5], "session-a"), "session-b", what="x")


@pytest.mark.parametrize("descending", [False, True])
def test_the_keyset_condition_selects_exactly_the_rows_after_a_position(descending: bool) -> None:
    table = Table("t", MetaData(), Column("a", Integer), Column("b", String(4)))
    engine = create_engine("sqlite://")
    rows = [{"a": a, "b": b} for a, b in itertools.product(range(4), "xyz")]
    with engine.begin() as connection:
        table.create(connection)
        connection.execute(insert(table), rows)
        for position in [(a, b) for a in range(-1, 5) for b in "wxyz"]:
            query = select(table.c.a, table.c.b).where(
                after_keyset((table.c.a, table.c.b), position, descending=descending)
            )
            found = set(connection.execute(query).all())
            expected = {
                (r["a"], r["b"])
                for r in rows
                if ((r["a"], r["b"]) < position if descending else (r["a"], r["b"]) > position)
            }
            assert found == expected, position
