"""The hints of schema errors: the command they name carries the URL as the user wrote
it (not the driver it resolved to), the same from ``db check`` and from a ledger; and
tables in a PostgreSQL schema that the caller forgot to name are pointed to, not
upgraded a second time in the default schema."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import URL

from agentledger import AsyncLedger, Ledger, migrations
from agentledger.cli import EXIT_OK, EXIT_SCHEMA, main
from agentledger.engine import URL_ENV
from agentledger.errors import SchemaError

from ..databases import scratch_database

OLD = "agentledger_0001"


@pytest.fixture
def behind(tmp_path: Path) -> str:
    """A SQLite file at the first revision, as the user would write its URL."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    migrations.upgrade(url, OLD)
    return url


def _ledger_error(url: str | None) -> SchemaError:
    with Ledger(url) as ledger, pytest.raises(SchemaError) as caught:
        ledger.sessions.list()
    return caught.value


async def _async_ledger_error(url: str) -> SchemaError:
    async with AsyncLedger(url) as ledger:
        with pytest.raises(SchemaError) as caught:
            await ledger.sessions.list()
    return caught.value


def test_a_ledger_s_hint_names_the_sqlite_url_as_written(behind: str) -> None:
    assert _ledger_error(behind).hint == f"agentledger db upgrade --url '{behind}'"


def test_an_async_ledger_s_hint_names_the_sqlite_url_as_written(behind: str) -> None:
    assert (
        asyncio.run(_async_ledger_error(behind)).hint == f"agentledger db upgrade --url '{behind}'"
    )


def test_a_ledger_given_no_url_names_the_environment_s_url(
    behind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(URL_ENV, behind)
    assert _ledger_error(None).hint == f"agentledger db upgrade --url '{behind}'"


def test_db_check_and_a_session_command_give_the_same_hint(
    behind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "check", "--url", behind]) == EXIT_SCHEMA
    checked = capsys.readouterr().err
    assert main(["sessions", "list", "--url", behind]) == EXIT_SCHEMA
    listed = capsys.readouterr().err
    assert checked == listed
    assert f"to fix: agentledger db upgrade --url '{behind}'" in listed


@pytest.fixture
def pg_url(tmp_path: Path) -> Iterator[URL]:
    with scratch_database("postgresql", str(tmp_path)) as url:
        yield url.set(drivername="postgresql")  # as a user writes it: no driver


@pytest.mark.postgresql
def test_a_ledger_s_hint_names_the_postgresql_url_as_written(pg_url: URL) -> None:
    migrations.upgrade(pg_url, OLD)
    written = pg_url.render_as_string(hide_password=False)

    hint = _ledger_error(written).hint
    assert hint == f"agentledger db upgrade --url '{pg_url.render_as_string(hide_password=True)}'"
    assert "+psycopg" not in str(hint)


@pytest.mark.postgresql
def test_an_async_ledger_s_hint_names_the_postgresql_url_as_written(pg_url: URL) -> None:
    migrations.upgrade(pg_url, OLD)
    written = pg_url.render_as_string(hide_password=False)

    hint = asyncio.run(_async_ledger_error(written)).hint
    assert hint == f"agentledger db upgrade --url '{pg_url.render_as_string(hide_password=True)}'"


@pytest.fixture
def in_schema(pg_url: URL) -> str:
    """A PostgreSQL database whose agentledger tables live in the schema ``agents``."""
    migrations.upgrade(pg_url, schema="agents")
    written = pg_url.render_as_string(hide_password=False)
    with Ledger(written, schema="agents") as ledger:
        ledger.sessions.create("in-agents")
    return written


@pytest.mark.postgresql
def test_a_forgotten_schema_is_named_instead_of_an_upgrade(in_schema: str) -> None:
    error = _ledger_error(in_schema)

    assert "PostgreSQL schema agents holds them" in str(error)
    assert error.hint is not None and error.hint.startswith("pass --schema agents")
    assert 'schema="agents"' in error.hint and "AGENTLEDGER_SCHEMA=agents" in error.hint
    assert "db upgrade --url" not in error.hint


@pytest.mark.postgresql
def test_the_command_line_names_the_forgotten_schema(
    in_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "list", "--url", in_schema]) == EXIT_SCHEMA
    assert "to fix: pass --schema agents" in capsys.readouterr().err

    assert main(["sessions", "list", "--url", in_schema, "--schema", "agents"]) == EXIT_OK
    assert "in-agents" in capsys.readouterr().out


@pytest.mark.postgresql
def test_without_tables_in_any_schema_the_hint_is_the_upgrade(pg_url: URL) -> None:
    written = pg_url.render_as_string(hide_password=False)
    hint = _ledger_error(written).hint
    assert hint is not None and hint.startswith("agentledger db upgrade --url")
