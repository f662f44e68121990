"""Oracle stores '' as NULL: the text types keep it there in a stand-in
(``models.types.ORACLE_EMPTY``), and nowhere else."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import literal, select
from sqlalchemy.dialects import mysql, oracle, postgresql, sqlite
from sqlalchemy.engine import Dialect

from agentledger.models.types import (
    ORACLE_EMPTY,
    Identifier,
    LongText,
    OrderedIdentifier,
    PlainText,
    ShortText,
)

TEXT_TYPES = [Identifier(64), OrderedIdentifier(64), ShortText(64), PlainText(), LongText()]
ORACLE: Dialect = oracle.dialect()  # type: ignore[no-untyped-call]


def stored(type_: Any, value: str | None) -> Any:
    processor = type_._cached_bind_processor(ORACLE)
    return processor(value)


def read(type_: Any, value: str | None) -> Any:
    processor = type_._cached_result_processor(ORACLE, None)
    return processor(value)


@pytest.mark.parametrize("type_", TEXT_TYPES)
def test_the_empty_string_is_stored_on_oracle_as_a_stand_in_and_read_back(type_: Any) -> None:
    assert stored(type_, "") == ORACLE_EMPTY
    assert read(type_, ORACLE_EMPTY) == ""


@pytest.mark.parametrize("type_", TEXT_TYPES)
@pytest.mark.parametrize("value", ["a", "x|y:z", ORACLE_EMPTY, ORACLE_EMPTY * 2 + "a", " "])
def test_every_other_value_reads_back_as_written_on_oracle(type_: Any, value: str) -> None:
    assert read(type_, stored(type_, value)) == value


@pytest.mark.parametrize("type_", TEXT_TYPES)
def test_null_stays_null_on_oracle(type_: Any) -> None:
    assert (stored(type_, None), read(type_, None)) == (None, None)


def test_stored_values_sort_as_the_values_do() -> None:
    values = ["", ORACLE_EMPTY, ORACLE_EMPTY + "a", " ", "a", "a" + ORACLE_EMPTY, "b"]
    type_ = OrderedIdentifier(64)
    assert sorted(values, key=lambda value: stored(type_, value)) == sorted(values)


@pytest.mark.parametrize(
    "dialect",
    [sqlite.dialect(), postgresql.dialect(), mysql.dialect(), mysql.dialect(is_mariadb=True)],  # type: ignore[no-untyped-call]
    ids=["sqlite", "postgresql", "mysql", "mariadb"],
)
@pytest.mark.parametrize("type_", TEXT_TYPES)
def test_other_dialects_store_text_as_it_is_with_no_processing(
    type_: Any, dialect: Dialect
) -> None:
    assert type_._cached_bind_processor(dialect) is None
    assert type_._cached_result_processor(dialect, None) is None


def test_an_empty_string_rendered_inline_for_oracle_is_the_stand_in() -> None:
    statement = select(literal("", OrderedIdentifier(8)), literal("ab", OrderedIdentifier(8)))
    rendered = statement.compile(dialect=ORACLE, compile_kwargs={"literal_binds": True})
    assert str(rendered) == f"SELECT '{ORACLE_EMPTY}' AS anon_1, 'ab' AS anon_2 FROM DUAL"
