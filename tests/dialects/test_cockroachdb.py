"""Distributed SQL on paper: the schema and every migration compile for CockroachDB.

No server is needed: the models are compiled with the CockroachDB dialect
(``sqlalchemy-cockroachdb``) through a mock engine, the migrations rendered as offline
SQL with it, and both, with their PostgreSQL renderings, are checked for the
PostgreSQL features CockroachDB lacks, so none creeps into the schema unnoticed.
docs/dialects.md ("CockroachDB, on paper") says what this does not cover.
"""

from __future__ import annotations

import importlib.util
import re
from typing import Any

import pytest
from sqlalchemy import create_mock_engine
from sqlalchemy.engine import make_url

from agentledger import migrations
from agentledger.models import TEXT_INDEXES, VERSION_TABLE, metadata

from ..databases import IN_CI

LACKING: dict[str, str] = {
    r"\bDEFERRABLE\b|\bINITIALLY\s+DEFERRED\b": "deferrable constraints",
    r"\bEXCLUDE\s+USING\b": "exclusion constraints",
    r"\bCREATE\s+EXTENSION\b": "extensions",
    r"\bCREATE\s+(OR\s+REPLACE\s+)?(CONSTRAINT\s+)?TRIGGER\b": "triggers",
    r"\bCREATE\s+(OR\s+REPLACE\s+)?RULE\b": "rules",
    r"\bCREATE\s+(OR\s+REPLACE\s+)?(FUNCTION|PROCEDURE)\b|\bDO\s+\$": "server-side code",
    r"\bINHERITS\s*\(": "table inheritance",
    r"\bTABLESPACE\b": "tablespaces",
    r"\bCREATE\s+DOMAIN\b": "domains",
    r"\bUSING\s+(GIST|SPGIST|BRIN|HASH)\b": "GiST, SP-GiST, BRIN and hash indexes",
    # Widening a VARCHAR rewrites nothing and runs by default; other type changes need
    # CockroachDB's experimental setting (0003 widens ids and roles, nothing else).
    r"\bALTER\s+COLUMN\s+\S+\s+(SET\s+DATA\s+)?TYPE\s+(?!VARCHAR\s*\()": "changing a column's "
    "type other than widening a VARCHAR (experimental, off by default)",
    r"\bXML\b": "the xml type",
    r"\b(LISTEN|NOTIFY)\b": "LISTEN/NOTIFY",
    r"\bpg_(try_)?advisory_(un)?lock(_shared)?\b": "session advisory locks (no-op stubs)",
}
"""PostgreSQL features CockroachDB lacks (or only fakes), by a pattern of their SQL."""


@pytest.fixture(autouse=True, scope="module")
def _dialect_installed() -> None:
    if importlib.util.find_spec("sqlalchemy_cockroachdb") is None:
        message = (
            "sqlalchemy-cockroachdb is not installed: python3 dev.py setup installs it "
            "(pip install --no-deps sqlalchemy-cockroachdb: it pins SQLAlchemy<2.1)"
        )
        if IN_CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def lacking(sql: str) -> list[str]:
    """What of ``sql`` CockroachDB lacks, one entry per feature found."""
    return [
        feature
        for pattern, feature in LACKING.items()
        if re.search(pattern, sql, re.IGNORECASE) is not None
    ]


def models_ddl(url: str) -> list[str]:
    """The CREATE statements of agentledger's models, compiled for ``url``'s dialect."""
    statements: list[str] = []

    def record(ddl: Any, *_args: Any, **_kwargs: Any) -> None:
        statements.append(str(ddl.compile(dialect=engine.dialect)).strip())

    engine = create_mock_engine(make_url(url), record)
    metadata.create_all(engine, checkfirst=False)
    return statements


def migrations_sql(url: str) -> str:
    """Every migration, base to head, as offline SQL for ``url``'s dialect (``db sql``:
    an untested dialect's URL is taken, on the portable profile)."""
    return migrations.sql(url)


RENDERINGS = {
    "cockroachdb-models": lambda: "\n".join(models_ddl("cockroachdb://")),
    "cockroachdb-migrations": lambda: migrations_sql("cockroachdb://"),
    "postgresql-models": lambda: "\n".join(models_ddl("postgresql://")),
    "postgresql-migrations": lambda: migrations.sql("postgresql://"),
}


def test_every_table_and_index_of_the_models_compiles_for_cockroachdb() -> None:
    statements = models_ddl("cockroachdb://")

    tables = {found[1] for ddl in statements if (found := re.match(r"CREATE TABLE (\w+)", ddl))}
    assert tables == {table.name for table in metadata.sorted_tables}
    indexes = sum(1 for ddl in statements if ddl.startswith("CREATE INDEX"))
    # The text indexes over memory items' words are made on their own families only.
    every = sum(len(table.indexes) for table in metadata.sorted_tables)
    assert indexes == every - len(TEXT_INDEXES)


def test_every_migration_renders_for_cockroachdb_up_to_head() -> None:
    script = migrations_sql("cockroachdb://")

    for table in metadata.sorted_tables:
        assert f"CREATE TABLE {table.name} (" in script
    assert f"UPDATE {VERSION_TABLE} SET version_num='{migrations.head()}'" in script


@pytest.mark.parametrize("rendering", list(RENDERINGS))
def test_the_schema_uses_nothing_cockroachdb_lacks(rendering: str) -> None:
    assert lacking(RENDERINGS[rendering]()) == []


@pytest.mark.parametrize(
    ("sql", "feature"),
    [
        ("ALTER TABLE t ADD CONSTRAINT c UNIQUE (a) DEFERRABLE", "deferrable constraints"),
        ("ALTER TABLE t ADD EXCLUDE USING gist (r WITH &&)", "exclusion constraints"),
        ('CREATE EXTENSION IF NOT EXISTS "pgcrypto"', "extensions"),
        ("CREATE TRIGGER t BEFORE UPDATE ON s FOR EACH ROW EXECUTE FUNCTION f()", "triggers"),
        ("CREATE OR REPLACE FUNCTION f() RETURNS trigger AS $$ $$", "server-side code"),
        ("DO $$BEGIN PERFORM 1; END$$", "server-side code"),
        ("CREATE TABLE c () INHERITS (p)", "table inheritance"),
        ("CREATE INDEX i ON t USING brin (created_at)", "GiST, SP-GiST, BRIN and hash indexes"),
        (
            "ALTER TABLE t ALTER COLUMN c TYPE BIGINT",
            "changing a column's type other than widening a VARCHAR (experimental, off by default)",
        ),
        ("SELECT pg_advisory_lock(1)", "session advisory locks (no-op stubs)"),
    ],
)
def test_the_check_finds_what_cockroachdb_lacks(sql: str, feature: str) -> None:
    assert feature in lacking(sql)


def test_widening_a_varchar_is_not_a_type_change_cockroachdb_lacks() -> None:
    assert lacking("ALTER TABLE t ALTER COLUMN c TYPE VARCHAR(255)") == []
