"""The PostgreSQL schema option: tables and version table in the schema, refused elsewhere."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import func, select
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from agentledger import migrations
from agentledger.engine import create_sync_engine
from agentledger.errors import SchemaError, ValidationError
from agentledger.models import VERSION_TABLE, AgentSession

from ..databases import dialect_params, scratch_database
from ._support import OUR_TABLES, drift, new_session, our_table_names

EVERYTHING = OUR_TABLES | {VERSION_TABLE}


@pytest.fixture
def pg_url(tmp_path: Path) -> Iterator[URL]:
    with scratch_database("postgresql", str(tmp_path)) as url:
        yield url


def _sessions_in(url: URL, schema: str) -> list[str]:
    engine = create_sync_engine(url, poolclass=NullPool)
    translated = engine.execution_options(schema_translate_map={None: schema})
    try:
        with Session(translated) as session:
            return list(session.scalars(select(AgentSession.id).order_by(AgentSession.id)))
    finally:
        engine.dispose()


def _add_session(url: URL, schema: str, id: str) -> None:
    engine = create_sync_engine(url, poolclass=NullPool)
    translated = engine.execution_options(schema_translate_map={None: schema})
    try:
        with Session(translated) as session, session.begin():
            session.add(new_session(id))
    finally:
        engine.dispose()


@pytest.mark.postgresql
def test_two_schemas_in_one_database_hold_separate_tables(pg_url: URL) -> None:
    migrations.upgrade(pg_url, schema="agents_a")
    migrations.upgrade(pg_url, schema="agents_b")

    assert our_table_names(pg_url, schema="agents_a") == EVERYTHING
    assert our_table_names(pg_url, schema="agents_b") == EVERYTHING
    assert our_table_names(pg_url) == set()  # nothing in public
    assert migrations.current(pg_url, schema="agents_a") == migrations.head()
    assert migrations.current(pg_url, schema="agents_b") == migrations.head()
    assert migrations.current(pg_url) is None


@pytest.mark.postgresql
def test_rows_in_one_schema_are_invisible_from_the_other(pg_url: URL) -> None:
    migrations.upgrade(pg_url, schema="agents_a")
    migrations.upgrade(pg_url, schema="agents_b")

    _add_session(pg_url, "agents_a", "only-in-a")

    assert _sessions_in(pg_url, "agents_a") == ["only-in-a"]
    assert _sessions_in(pg_url, "agents_b") == []


@pytest.mark.postgresql
def test_downgrading_one_schema_leaves_the_other_alone(pg_url: URL) -> None:
    migrations.upgrade(pg_url, schema="agents_a")
    migrations.upgrade(pg_url, schema="agents_b")

    migrations.downgrade(pg_url, "base", schema="agents_a")

    assert our_table_names(pg_url, schema="agents_a") == {VERSION_TABLE}
    assert our_table_names(pg_url, schema="agents_b") == EVERYTHING
    assert migrations.current(pg_url, schema="agents_b") == migrations.head()


@pytest.mark.postgresql
def test_a_schema_migrated_database_matches_the_models(pg_url: URL) -> None:
    migrations.upgrade(pg_url, schema="agents_a")
    migrations.upgrade(pg_url, schema="agents_b")

    assert drift(pg_url, schema="agents_a") == []
    migrations.check(pg_url, schema="agents_a")
    engine = create_sync_engine(pg_url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            config = migrations.alembic_config(schema="agents_a")
            config.attributes["connection"] = connection
            command.check(config)  # our env's autogenerate looks in the schema, only there
    finally:
        engine.dispose()


@pytest.mark.postgresql
def test_same_named_tables_in_public_are_untouched(pg_url: URL) -> None:
    migrations.upgrade(pg_url)  # agentledger in public
    _add_session(pg_url, "public", "in-public")

    migrations.upgrade(pg_url, schema="agents_a")
    migrations.downgrade(pg_url, "base", schema="agents_a")

    assert our_table_names(pg_url) == EVERYTHING
    engine = create_sync_engine(pg_url, poolclass=NullPool)
    try:
        with Session(engine) as session:
            assert session.scalar(select(func.count()).select_from(AgentSession)) == 1
    finally:
        engine.dispose()


@pytest.mark.parametrize("dialect", dialect_params("sqlite", "mysql"))
def test_the_schema_option_is_refused_off_postgresql(dialect: str, tmp_path: Path) -> None:
    with scratch_database(dialect, str(tmp_path)) as url:
        for call in (
            lambda: migrations.upgrade(url, schema="agents"),
            lambda: migrations.current(url, schema="agents"),
            lambda: migrations.check(url, schema="agents"),
        ):
            with pytest.raises(SchemaError, match="only available on PostgreSQL"):
                call()
        assert our_table_names(url) == set()


@pytest.mark.parametrize(
    "name", ["", "1agents", "agents-a", "agents a", 'a"; DROP TABLE x; --', "a" * 64, "ägents"]
)
@pytest.mark.parametrize("dialect", dialect_params("sqlite", "postgresql"))
def test_invalid_schema_names_are_refused(dialect: str, name: str, tmp_path: Path) -> None:
    with scratch_database(dialect, str(tmp_path)) as url:
        with pytest.raises(ValidationError, match="invalid schema name"):
            migrations.upgrade(url, schema=name)
        assert our_table_names(url) == set()
