"""A set of keys is matched with row values where the database has them, and group by
group where it has not (SQL Server, the portable profile)."""

from __future__ import annotations

from sqlalchemy import Column, MetaData, String, Table
from sqlalchemy.dialects import mssql, postgresql

from agentledger.repositories._statements import rows_in

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
