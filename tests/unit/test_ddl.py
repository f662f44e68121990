"""Compiled DDL is portable: names, lengths and defaults hold on every dialect (T17)."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import JSON, Column, Index, String, Table, Text, UniqueConstraint
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.schema import CreateIndex, CreateTable
from sqlalchemy.types import TypeEngine

from agentledger.models import TEXT_INDEXES, metadata

DIALECTS: dict[str, Dialect] = {
    "postgresql": postgresql.dialect(),
    "mysql": mysql.dialect(),
    "sqlite": sqlite.dialect(),
}
TABLES = {
    "agentledger_sessions",
    "agentledger_messages",
    "agentledger_steps",
    "agentledger_grants",
    "agentledger_checkpoints",
    "agentledger_app_state",
    "agentledger_user_state",
    "agentledger_langgraph_checkpoints",
    "agentledger_langgraph_blobs",
    "agentledger_langgraph_writes",
    "agentledger_memory_items",
}
MAX_NAME = 60
MAX_INDEXED_CHARS = 767  # one column of an InnoDB key: 3,072 bytes of utf8mb4
MAX_KEY_BYTES = 3072  # InnoDB's key limit; utf8mb4 takes up to 4 bytes a character
_NAMED = re.compile(r"\b(?:CONSTRAINT|INDEX)\s+[`\"]?(\w+)[`\"]?")


def _ddl(dialect: Dialect) -> list[str]:
    statements = []
    for table in metadata.sorted_tables:
        statements.append(str(CreateTable(table).compile(dialect=dialect)))
        statements += [str(CreateIndex(index).compile(dialect=dialect)) for index in table.indexes]
    return statements


def _names(dialect: Dialect) -> list[str]:
    return [name for statement in _ddl(dialect) for name in _NAMED.findall(statement)]


def _types(column: Column[object]) -> list[TypeEngine[object]]:
    """The column's type and every per-dialect variant of it."""
    type_ = column.type
    return [type_, *getattr(type_, "_variant_mapping", {}).values()]


def _columns() -> list[Column[object]]:
    return [column for table in metadata.sorted_tables for column in table.columns]


def test_the_tables_have_the_contract_names() -> None:
    assert set(metadata.tables) == TABLES


@pytest.mark.parametrize("dialect", DIALECTS, ids=str)
def test_every_constraint_and_index_name_is_at_most_60_characters(dialect: str) -> None:
    names = _names(DIALECTS[dialect])
    assert names, "no names were found in the compiled DDL"
    too_long = [name for name in names if len(name) > MAX_NAME]
    assert too_long == []


def test_constraint_and_index_names_are_identical_across_dialects() -> None:
    by_dialect = {name: sorted(_names(dialect)) for name, dialect in DIALECTS.items()}
    assert by_dialect["postgresql"] == by_dialect["mysql"] == by_dialect["sqlite"]


def test_every_constraint_and_index_is_named_by_the_convention() -> None:
    for table in metadata.sorted_tables:
        named = [*table.constraints, *table.indexes]
        for item in named:
            assert item.name, f"{table.name}: unnamed {type(item).__name__}"
            assert str(item.name).startswith(("pk_", "fk_", "uq_", "ix_", "ck_"))
            assert table.name in str(item.name)


@pytest.mark.parametrize("dialect", DIALECTS, ids=str)
def test_the_ddl_compiles_with_every_name_unique(dialect: str) -> None:
    names = _names(DIALECTS[dialect])
    assert len(names) == len(set(names))


def test_every_string_has_a_length() -> None:
    missing = [
        f"{column.table.name}.{column.name}"
        for column in _columns()
        for type_ in _types(column)
        if isinstance(type_, String)
        and not isinstance(type_, Text | mysql.LONGTEXT)
        and type_.length is None
    ]
    assert missing == []


def _key_columns(table: Table) -> list[tuple[str, list[Column[object]]]]:
    keys: list[tuple[str, list[Column[object]]]] = []
    for constraint in table.constraints:
        if isinstance(constraint, UniqueConstraint) or constraint is table.primary_key:
            keys.append((str(constraint.name), list(constraint.columns)))
    for index in table.indexes:
        assert isinstance(index, Index)
        keys.append((str(index.name), [c for c in index.columns if isinstance(c, Column)]))
    return keys


def test_indexed_strings_fit_mysql_key_limits() -> None:
    for table in metadata.sorted_tables:
        for name, columns in _key_columns(table):
            lengths = [
                type_.length or 0
                for column in columns
                for type_ in _types(column)[:1]
                if isinstance(type_, String)
            ]
            assert all(length <= MAX_INDEXED_CHARS for length in lengths), name
            assert sum(lengths) * 4 <= MAX_KEY_BYTES, name


def test_no_server_defaults_on_json_or_text() -> None:
    offenders = [
        f"{column.table.name}.{column.name}"
        for column in _columns()
        if column.server_default is not None
        and any(isinstance(type_, JSON | Text) for type_ in _types(column))
    ]
    assert offenders == []


@pytest.mark.parametrize("dialect", DIALECTS, ids=str)
def test_no_default_clause_in_compiled_ddl(dialect: str) -> None:
    # Python-side defaults only: MySQL 8 rejects literal defaults on JSON/TEXT.
    assert not any(" DEFAULT " in statement for statement in _ddl(DIALECTS[dialect]))


def test_mysql_ddl_makes_ids_case_sensitive_and_keeps_microseconds() -> None:
    sessions = str(
        CreateTable(metadata.tables["agentledger_sessions"]).compile(dialect=DIALECTS["mysql"])
    )
    assert "id VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL" in sessions
    assert "created_at DATETIME(6) NOT NULL" in sessions


def test_sqlite_ddl_autoincrements_64_bit_ids() -> None:
    messages = str(
        CreateTable(metadata.tables["agentledger_messages"]).compile(dialect=DIALECTS["sqlite"])
    )
    assert "id INTEGER NOT NULL" in messages


def test_each_text_index_belongs_to_the_memory_table() -> None:
    # An index whose expressions hold a column of no table finds no table of its own.
    on_items = {index.name for index in metadata.tables["agentledger_memory_items"].indexes}
    assert on_items >= TEXT_INDEXES


@pytest.mark.parametrize(
    ("dialect", "name"), [(postgresql.dialect(), "_tsvector"), (mysql.dialect(), "")]
)
def test_each_family_makes_its_own_text_index(dialect: Dialect, name: str) -> None:
    table = metadata.tables["agentledger_memory_items"]
    made = [
        str(CreateIndex(index).compile(dialect=dialect))
        for index in table.indexes
        if index.name == f"ix_agentledger_memory_items_words{name}"
    ]
    assert len(made) == 1
    assert ("to_tsvector('simple', words)" in made[0]) == (name == "_tsvector")
