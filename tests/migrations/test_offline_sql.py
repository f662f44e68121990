"""Offline SQL (`--sql`): rendered for PostgreSQL and MySQL, refused for SQLite (T12)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger import migrations
from agentledger.errors import SchemaError, ValidationError
from agentledger.models import VERSION_TABLE

from ..databases import dialect_params, scratch_database
from ._support import OUR_TABLES, drift, our_table_names

OFFLINE = {"postgresql": "postgresql://", "mysql": "mysql://"}


@pytest.mark.parametrize("dialect", ["postgresql", "mysql"])
def test_offline_sql_creates_every_table_and_stamps_head(dialect: str) -> None:
    script = migrations.sql(OFFLINE[dialect])

    for table in OUR_TABLES | {VERSION_TABLE}:
        assert f"CREATE TABLE {table} (" in script
    # A plain INSERT: an offline script fetches nothing back (no RETURNING).
    assert f"INSERT INTO {VERSION_TABLE} (version_num) VALUES ('agentledger_0001');" in script
    assert f"UPDATE {VERSION_TABLE} SET version_num='{migrations.head()}'" in script
    assert "alembic_version " not in script.replace(VERSION_TABLE, "")


@pytest.mark.parametrize(
    ("dialect", "ddl"),
    [
        ("postgresql", "CREATE INDEX IF NOT EXISTS ix_agentledger_steps_started_at_model "),
        ("mysql", "CREATE INDEX ix_agentledger_steps_started_at_model "),
    ],
)
def test_offline_sql_from_0001_to_0002_is_only_the_new_index(dialect: str, ddl: str) -> None:
    script = migrations.sql(OFFLINE[dialect], "agentledger_0002", from_revision="agentledger_0001")

    assert f"{ddl}ON agentledger_steps (started_at, model);" in script
    assert "CREATE TABLE" not in script and "DROP" not in script


def test_offline_sql_for_postgresql_commits_each_revision() -> None:
    script = migrations.sql("postgresql://")
    assert script.count("BEGIN;") == script.count("COMMIT;") >= 1
    assert "JSONB" in script and "TIMESTAMP WITH TIME ZONE" in script


def test_offline_sql_for_mysql_keeps_microseconds_and_binary_ids() -> None:
    script = migrations.sql("mysql://")
    assert "DATETIME(6)" in script
    assert "COLLATE utf8mb4_bin" in script
    assert "DATETIME " not in script.replace("DATETIME(6)", "")


def test_offline_sql_puts_everything_in_the_postgresql_schema() -> None:
    script = migrations.sql("postgresql://", schema="agents")
    assert "CREATE TABLE agents.agentledger_sessions (" in script
    assert f"CREATE TABLE agents.{VERSION_TABLE} (" in script
    assert "REFERENCES agents.agentledger_sessions (id)" in script
    assert re.search(r"CREATE TABLE agentledger_", script) is None


def test_offline_sql_from_head_to_head_is_empty_of_ddl() -> None:
    head = migrations.head()
    assert "CREATE TABLE" not in migrations.sql("postgresql://", from_revision=head)


def test_offline_sql_is_refused_for_sqlite() -> None:
    with pytest.raises(SchemaError, match="not available for SQLite") as caught:
        migrations.sql("sqlite:///agentledger.db")
    assert caught.value.hint is not None and "agentledger db upgrade" in caught.value.hint


def test_offline_sql_refuses_the_schema_option_on_mysql() -> None:
    with pytest.raises(SchemaError, match="only available on PostgreSQL"):
        migrations.sql("mysql://", schema="agents")


def test_offline_sql_refuses_an_invalid_schema_name() -> None:
    with pytest.raises(ValidationError):
        migrations.sql("postgresql://", schema="agents; DROP TABLE x")


def test_offline_sql_needs_no_driver_or_server() -> None:
    # The host and port below do not exist; rendering must not try to connect.
    assert "CREATE TABLE" in migrations.sql("postgresql://nobody:pw@192.0.2.1:1/none")


def _apply(url: URL, script: str) -> None:
    engine = create_engine(url, poolclass=NullPool)
    try:
        raw = engine.raw_connection()
        try:
            cursor = raw.cursor()
            # Statements end with ';' at a line end; no literal in our DDL contains one.
            for statement in re.split(r";\s*\n", script):
                if statement.strip():
                    cursor.execute(statement)
            raw.commit()
        finally:
            raw.close()
    finally:
        engine.dispose()


@pytest.mark.parametrize("dialect", dialect_params("postgresql", "mysql"))
def test_applying_the_offline_sql_gives_the_migrated_schema(dialect: str, tmp_path: Path) -> None:
    with scratch_database(dialect, str(tmp_path)) as url:
        _apply(url, migrations.sql(url))

        assert migrations.current(url) == migrations.head()
        assert our_table_names(url) == OUR_TABLES | {VERSION_TABLE}
        assert drift(url) == []
