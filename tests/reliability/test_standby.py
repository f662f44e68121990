"""A ledger on a real PostgreSQL hot standby (``tests/private_standby.py``: a private
primary and standby of the machine's PostgreSQL 15 on loopback): reads and read-only
units of work work there on every driver, also after a read-only unit of work on the
same connection (it left psycopg's connections beginning READ WRITE, which a standby
refuses), and every write is a ``ReadOnlyDatabaseError``: 25006, and 0A000 for a
transaction a driver begins READ WRITE."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import NullPool

from agentledger import AsyncLedger, Ledger, NewMessage, ReadOnlyDatabaseError, migrations
from agentledger._translate import sqlstate
from agentledger.testing.harness import SyncAdapter

from .. import private_standby

pytestmark = [pytest.mark.postgresql, pytest.mark.slow]

REPLAY_WAIT_S = 30
DRIVERS = ["psycopg", "psycopg2", "pg8000", "asyncpg", "psycopg_async"]
ASYNC_DRIVERS = {"asyncpg", "psycopg_async"}


@pytest.fixture(scope="module")
def standby() -> Iterator[URL]:
    """The standby's URL, of a database the primary migrated and seeded (a session
    ``kept`` of one message) and the standby replayed."""
    missing = private_standby.available()
    if missing:
        pytest.skip(f"no PostgreSQL 15 for a private standby: {missing}")
    servers = private_standby.start("agentledger")
    try:
        primary = make_url(servers.primary_url)
        admin = create_engine(primary.set(database="postgres"), isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(text("CREATE DATABASE agentledger"))
        admin.dispose()
        migrations.upgrade(primary)
        with Ledger(primary) as ledger:
            ledger.sessions.create("kept")
            ledger.messages.append("kept", NewMessage(role="user", content="hello"))
        url = make_url(servers.standby_url)
        wait_for_replay(url)
        yield url
    finally:
        servers.close()


def wait_for_replay(url: URL) -> None:
    deadline = time.monotonic() + REPLAY_WAIT_S
    while time.monotonic() < deadline:
        try:
            with Ledger(url) as ledger:
                if ledger.messages.all("kept"):
                    return
        except Exception:  # the database itself may not be replayed yet
            pass
        time.sleep(0.1)
    pytest.fail(f"the standby did not replay the seed within {REPLAY_WAIT_S} s")


def ledger_on(url: URL, driver: str) -> Any:
    address = url.set(drivername=f"postgresql+{driver}")
    return AsyncLedger(address) if driver in ASYNC_DRIVERS else SyncAdapter(Ledger(address))


def run(url: URL, driver: str, scenario: Callable[[Any], Awaitable[Any]]) -> Any:
    async def opened() -> Any:
        ledger = ledger_on(url, driver)
        try:
            return await scenario(ledger)
        finally:
            await ledger.close()

    return asyncio.run(opened())


@pytest.mark.parametrize("driver", DRIVERS)
def test_after_a_read_only_unit_of_work_units_of_work_and_run_still_read_on_a_standby(
    standby: URL, driver: str
) -> None:
    async def scenario(ledger: Any) -> None:
        async with ledger.unit_of_work(readonly=True) as uow:
            assert (await uow.sessions.get("kept")).id == "kept"
        async with ledger.unit_of_work() as uow:
            assert [m.content for m in await uow.messages.all("kept")] == ["hello"]

        async def read(uow: Any) -> int:
            return len(await uow.messages.all("kept"))

        assert await ledger.run(read) == 1
        conversation = await ledger.messages.conversation("kept")
        assert conversation.session.id == "kept"

    run(standby, driver, scenario)


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_write_on_a_standby_is_a_read_only_database_error(standby: URL, driver: str) -> None:
    async def scenario(ledger: Any) -> None:
        with pytest.raises(ReadOnlyDatabaseError) as raised:
            await ledger.messages.append("kept", NewMessage(role="user", content="refused"))
        assert not raised.value.retryable
        async with ledger.unit_of_work(readonly=True) as uow:
            await uow.sessions.get("kept")
        with pytest.raises(ReadOnlyDatabaseError):
            async with ledger.unit_of_work() as uow:
                await uow.sessions.create(f"refused-{uuid.uuid4().hex[:8]}")

    run(standby, driver, scenario)


def begins_read_write(url: URL, driver: str) -> Engine:
    """An engine whose driver begins every transaction READ WRITE, explicitly."""
    engine = create_engine(url.set(drivername=f"postgresql+{driver}"), poolclass=NullPool)
    attribute = "read_only" if driver == "psycopg" else "readonly"
    event.listen(engine, "connect", lambda dbapi, _record: setattr(dbapi, attribute, False))
    return engine


@pytest.mark.parametrize("driver", ["psycopg", "psycopg2"])
def test_a_transaction_begun_read_write_on_a_standby_is_a_read_only_database_error(
    standby: URL, driver: str
) -> None:
    engine = begins_read_write(standby, driver)
    try:
        with Ledger(engine=engine) as ledger:
            with pytest.raises(ReadOnlyDatabaseError) as raised, ledger.unit_of_work() as uow:
                uow.sessions.get("kept")
            assert raised.value.__cause__ is not None
            assert sqlstate(raised.value.__cause__) == "0A000"
    finally:
        engine.dispose()
