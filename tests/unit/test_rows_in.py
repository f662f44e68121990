"""A set of keys is matched, and a keyset page starts, with row values where the database
has them, and column by column where it has not (SQL Server, Oracle's ``<``, the portable
profile)."""

from __future__ import annotations

from sqlalchemy import Column, MetaData, String, Table
from sqlalchemy.dialects import mssql, oracle, postgresql

from agentledger.repositories._statements import rows_before, rows_in

ITEMS = Table("items", MetaData(), Column("ns", String(10)), Column("key", String(10)))
KEYS = [("a", "1"), ("a", "2"), ("b", "1")]


def _sql(dialect: object, rows: list[tuple[str, str]]) -> str:
    condition = rows_in(dialect, (ITEMS.c.ns, ITEMS.c.key), rows)  # type: ignore[arg-type]
    return str(condition.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))  # type: ignore[arg-type]


def test_a_database_with_row_values_is_sent_one_row_value_in_list() -> None:
    assert _sql(postgresql.dialect(), KEYS) == (
        "(items.ns, items.key) IN (('a', '1'), ('a', '2'), ('b', '1'))"
    )


def test_a_database_without_them_is_sent_the_keys_grouped_by_their_first_column() -> None:
    assert _sql(mssql.dialect(), KEYS) == (
        "items.ns = 'a' AND items.[key] IN ('1', '2') OR items.ns = 'b' AND items.[key] IN ('1')"
    )


def test_no_keys_match_no_row_without_row_values() -> None:
    assert _sql(mssql.dialect(), []) == "0 = 1"


def _before(dialect: object, position: tuple[str, str]) -> str:
    condition = rows_before(dialect, (ITEMS.c.ns, ITEMS.c.key), position)  # type: ignore[arg-type]
    return str(condition.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))  # type: ignore[arg-type]


def test_a_keyset_page_compares_one_row_value_where_the_database_has_them() -> None:
    assert _before(postgresql.dialect(), ("a", "1")) == "(items.ns, items.key) < ('a', '1')"


def test_a_keyset_page_is_spelled_column_by_column_without_row_values() -> None:
    assert _before(oracle.dialect(), ("a", "1")) == (
        "items.ns <= 'a' AND (items.ns < 'a' OR items.key < '1')"
    )
