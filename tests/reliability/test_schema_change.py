"""A schema change made by another process while asyncpg holds cached prepared
statements (T16): the next call is retried and succeeds, or the error says so."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger import AsyncLedger, DatabaseError

from ..databases import migrated_database
from . import summary

pytestmark = pytest.mark.postgresql


@pytest.fixture
def database(tmp_path: Path) -> Iterator[URL]:
    with migrated_database("postgresql", tmp_path) as url:
        yield url


def alter_from_another_process(url: URL, length: int) -> None:
    """What a deploy's migration does while the app runs: change a column's type."""
    engine = create_engine(url, poolclass=NullPool)
    with engine.begin() as connection:
        connection.execute(
            text(f"ALTER TABLE agentledger_sessions ALTER COLUMN title TYPE VARCHAR({length})")
        )
    engine.dispose()


async def test_a_ledger_call_after_an_external_schema_change_is_retried(database: URL) -> None:
    async with AsyncLedger(database.set(drivername="postgresql+asyncpg")) as ledger:
        await ledger.sessions.create("warm", title="before")
        for _ in range(3):  # cache the prepared statements on the pooled connection
            await ledger.sessions.get("warm")
        alter_from_another_process(database, 600)
        assert (await ledger.sessions.get("warm")).title == "before"
        alter_from_another_process(database, 512)
    summary.add("asyncpg stale statement cache", retried=1)


async def test_in_a_unit_of_work_the_error_is_retryable_and_run_retries_it(
    database: URL,
) -> None:
    async with AsyncLedger(database.set(drivername="postgresql+asyncpg")) as ledger:
        await ledger.sessions.create("warm", title="before")
        for _ in range(3):
            await ledger.sessions.get("warm")
        alter_from_another_process(database, 600)
        failures: list[DatabaseError] = []

        async def read(uow: Any) -> str:
            try:
                return str((await uow.sessions.get("warm")).title)
            except DatabaseError as error:
                failures.append(error)
                raise

        assert await ledger.run(read) == "before"
        assert len(failures) == 1
        assert failures[0].retryable and "schema change" in str(failures[0])
        alter_from_another_process(database, 512)
