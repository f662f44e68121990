"""Keyword search's SQL: it reads through the database's own text index when every
word of the query is one the index holds, and reads every item under the prefix when
one is not (the answers, the same either way, are the contract's:
agentledger.testing.MemoryKeywordContract)."""

from __future__ import annotations

import pytest
from sqlalchemy import Connection, text

from agentledger.repositories._keywords import NO_INDEX, TextIndex
from agentledger.repositories.memory import _read_text_index
from agentledger.testing import Harness, tier

from ._sql import on_engine, starting, statements_during

ADA = ("memories", "ada")
INDEX_OPERATORS = ("MATCH", "@@")
"""How each database's text index is asked: SQLite's FTS5 and MariaDB/MySQL's
``MATCH``, PostgreSQL's ``@@``."""


def _through_an_index(statements: list[tuple[str, object]]) -> list[bool]:
    return [
        any(operator in sql.upper() for operator in INDEX_OPERATORS)
        for sql in starting(statements, "SELECT")
        if "agentledger_memory_items" in sql
    ]


async def _stored(harness: Harness) -> None:
    await harness.ledger.memory.put(ADA, "a", {}, text="pasta with the family")
    await harness.ledger.memory.put(ADA, "b", {}, text="東京タワー")


@tier("dialect")
@pytest.mark.native
async def test_a_search_for_ordinary_words_reads_through_the_text_index(
    harness: Harness,
) -> None:
    await _stored(harness)
    with statements_during(harness) as statements:
        found = await harness.ledger.memory.search(ADA, words="Pasta family")
    assert [item.key for item in found] == ["a"]
    assert _through_an_index(statements) == [True]


@tier("dialect")
async def test_a_word_outside_ascii_reads_every_item_of_the_prefix(harness: Harness) -> None:
    await _stored(harness)
    with statements_during(harness) as statements:
        found = await harness.ledger.memory.search(ADA, words="pasta 東京")
    assert [item.key for item in found] == ["b", "a"]
    assert _through_an_index(statements) == [False]


@tier("dialect")
@pytest.mark.databases("mysql")
async def test_a_stopword_or_a_short_word_reads_past_mariadbs_fulltext_index(
    harness: Harness,
) -> None:
    await _stored(harness)
    for query in ("the", "pasta at"):
        with statements_during(harness) as statements:
            found = await harness.ledger.memory.search(ADA, words=query)
        assert [item.key for item in found] == ["a"]
        assert _through_an_index(statements) == [False]


@tier("dialect")
@pytest.mark.databases("postgresql")
async def test_postgresqls_search_can_use_the_gin_index(harness: Harness) -> None:
    def plan(connection: object) -> str:
        connection.execute(text("SET LOCAL enable_seqscan = off"))  # type: ignore[attr-defined]
        rows = connection.execute(  # type: ignore[attr-defined]
            text(
                "EXPLAIN SELECT key FROM agentledger_memory_items "
                "WHERE to_tsvector('simple', words) @@ to_tsquery('simple', 'pasta')"
            )
        )
        return "\n".join(row[0] for row in rows)

    assert "ix_agentledger_memory_items_words_tsvector" in await on_engine(harness, plan)


@tier("dialect")
@pytest.mark.databases("mysql")
async def test_a_stopword_list_of_the_servers_own_is_read_as_no_usable_index(
    harness: Harness,
) -> None:
    # Which words such a list drops is the server's business: keyword search must then
    # read every item under the prefix rather than trust the FULLTEXT index.
    def read_with_a_list_of_its_own(connection: Connection) -> TextIndex:
        database = connection.exec_driver_sql("SELECT DATABASE()").scalar_one()
        connection.exec_driver_sql(
            "CREATE TABLE IF NOT EXISTS agentledger_test_stopwords (value VARCHAR(30))"
            " ENGINE = InnoDB"
        )
        connection.exec_driver_sql(
            "SET SESSION innodb_ft_user_stopword_table = %s",
            (f"{database}/agentledger_test_stopwords",),
        )
        try:
            return _read_text_index(connection, "fulltext")
        finally:
            connection.exec_driver_sql("SET SESSION innodb_ft_user_stopword_table = DEFAULT")
            connection.exec_driver_sql("DROP TABLE agentledger_test_stopwords")

    def read_as_set_up(connection: Connection) -> TextIndex:
        return _read_text_index(connection, "fulltext")

    assert await on_engine(harness, read_with_a_list_of_its_own) == NO_INDEX
    assert (await on_engine(harness, read_as_set_up)).finds("pasta")
