"""`current` and `check`, and the ways a caller hands a database to the migrations."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger import migrations
from agentledger.engine import create_async_engine_for, create_sync_engine
from agentledger.errors import SchemaError
from agentledger.models import VERSION_TABLE

from ..databases import dialect_params, scratch_database
from ._support import OUR_TABLES, our_table_names


def test_current_is_none_on_an_empty_database(scratch_url: URL) -> None:
    assert migrations.current(scratch_url) is None


def test_check_on_an_empty_database_names_the_upgrade_command(scratch_url: URL) -> None:
    with pytest.raises(SchemaError, match="missing") as caught:
        migrations.check(scratch_url)

    error = caught.value
    assert error.current is None
    assert error.head == migrations.head()
    assert error.hint is not None and error.hint.startswith("agentledger db upgrade --url ")
    assert migrations.head() in str(error)


def test_check_passes_at_head(scratch_url: URL) -> None:
    migrations.upgrade(scratch_url)
    migrations.check(scratch_url)


def _stamp(url: URL, revision: str) -> None:
    engine = create_sync_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            update = text(f"UPDATE {VERSION_TABLE} SET version_num = :revision")
            connection.execute(update, {"revision": revision})
    finally:
        engine.dispose()


@pytest.fixture
def sqlite_at_head(tmp_path: Path) -> URL:
    url = URL.create("sqlite+pysqlite", database=str(tmp_path / "check.db"))
    migrations.upgrade(url)
    return url


def test_check_behind_names_both_revisions_and_the_command(scratch_url: URL) -> None:
    migrations.upgrade(scratch_url, "agentledger_0001")

    with pytest.raises(SchemaError, match="behind") as caught:
        migrations.check(scratch_url)

    assert (caught.value.current, caught.value.head) == ("agentledger_0001", migrations.head())
    assert "agentledger_0001" in str(caught.value) and migrations.head() in str(caught.value)
    assert "to apply: agentledger_0002, agentledger_0003" in str(caught.value)
    assert caught.value.hint is not None and "agentledger db upgrade" in caught.value.hint


@pytest.mark.sqlite
def test_check_refuses_a_database_newer_than_the_package(sqlite_at_head: URL) -> None:
    _stamp(sqlite_at_head, "agentledger_9999")

    with pytest.raises(SchemaError, match="newer than this package") as caught:
        migrations.check(sqlite_at_head)

    assert caught.value.current == "agentledger_9999"
    assert caught.value.hint == "upgrade the agentledger package"


@pytest.mark.postgresql
def test_the_hint_never_shows_the_password(tmp_path: Path) -> None:
    with scratch_database("postgresql", str(tmp_path)) as url:
        secret_url = url.set(password="s3cret-pw")  # the local server trusts any password
        with pytest.raises(SchemaError) as caught:
            migrations.check(secret_url)
    assert "s3cret-pw" not in str(caught.value)
    assert "***" in str(caught.value.hint)


def test_upgrade_through_a_caller_engine_leaves_it_usable(scratch_url: URL) -> None:
    engine = create_sync_engine(scratch_url, poolclass=NullPool)
    try:
        migrations.upgrade(engine)
        migrations.check(engine)
        with engine.connect() as connection:
            assert connection.execute(text("SELECT 1")).scalar() == 1
    finally:
        engine.dispose()


def test_upgrade_through_a_caller_connection(scratch_url: URL) -> None:
    engine = create_sync_engine(scratch_url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            migrations.upgrade(connection)
            assert migrations.current(connection) == migrations.head()
    finally:
        engine.dispose()
    assert our_table_names(scratch_url) == OUR_TABLES | {VERSION_TABLE}


@pytest.mark.parametrize("dialect", dialect_params())
async def test_upgrade_from_async_code_through_run_sync(dialect: str, tmp_path: Path) -> None:
    with scratch_database(dialect, str(tmp_path)) as url:
        engine = create_async_engine_for(url, poolclass=NullPool)
        try:
            async with engine.connect() as connection:
                await connection.run_sync(migrations.upgrade)
                assert await connection.run_sync(migrations.current) == migrations.head()
        finally:
            await engine.dispose()
        migrations.check(url)
