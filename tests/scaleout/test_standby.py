"""A ledger on a real PostgreSQL hot standby (``tests/private_standby.py``: a private
primary and standby of the machine's PostgreSQL 15 on loopback): every read works
there, sync and async, on every driver, also after a read-only unit of work on the same
connection (it left psycopg's connections beginning READ WRITE, which a standby
refuses), and every write is a ``ReadOnlyDatabaseError``: 25006, and 0A000 for a
transaction a driver begins READ WRITE."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import NullPool

from agentledger import (
    AsyncLedger,
    Ledger,
    NewMessage,
    NewStep,
    ReadOnlyDatabaseError,
    TokenUsage,
)
from agentledger._translate import sqlstate
from agentledger.testing.harness import SyncAdapter

from ..databases import driver_params
from .conftest import Standby

pytestmark = pytest.mark.slow

DRIVERS = ["psycopg", "psycopg2", "pg8000", "asyncpg", "psycopg_async"]
ASYNC_DRIVERS = {"asyncpg", "psycopg_async"}


@pytest.fixture(scope="module")
def seeded(standby: Standby) -> Standby:
    """The pair, with sessions the primary wrote and the standby replayed: ``kept`` (one
    message) and ``on-the-primary`` (a message and a step of 7 tokens, user ada)."""
    with Ledger(standby.primary) as ledger:
        ledger.sessions.create("kept")
        ledger.messages.append("kept", NewMessage(role="user", content="hello"))
        ledger.sessions.create("on-the-primary", user_id="ada", title="seeded")
        ledger.messages.append("on-the-primary", [NewMessage(role="user", content="hello")])
        usage = TokenUsage(input_tokens=3, output_tokens=4, total_tokens=7)
        ledger.steps.append("on-the-primary", NewStep(kind="model", model="m", usage=usage))
    standby.caught_up()
    return standby


@pytest.fixture(scope="module")
def on_standby(seeded: Standby) -> URL:
    return make_url(seeded.standby)


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


@pytest.mark.parametrize("driver", driver_params("postgresql", DRIVERS))
def test_after_a_read_only_unit_of_work_units_of_work_and_run_still_read_on_a_standby(
    on_standby: URL, driver: str
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

    run(on_standby, driver, scenario)


@pytest.mark.parametrize("driver", driver_params("postgresql", DRIVERS))
def test_a_write_on_a_standby_is_a_read_only_database_error(on_standby: URL, driver: str) -> None:
    async def scenario(ledger: Any) -> None:
        with pytest.raises(ReadOnlyDatabaseError) as raised:
            await ledger.messages.append("kept", NewMessage(role="user", content="refused"))
        assert not raised.value.retryable
        async with ledger.unit_of_work(readonly=True) as uow:
            await uow.sessions.get("kept")
        with pytest.raises(ReadOnlyDatabaseError):
            async with ledger.unit_of_work() as uow:
                await uow.sessions.create(f"refused-{uuid.uuid4().hex[:8]}")

    run(on_standby, driver, scenario)


def begins_read_write(url: URL, driver: str) -> Engine:
    """An engine whose driver begins every transaction READ WRITE, explicitly."""
    engine = create_engine(url.set(drivername=f"postgresql+{driver}"), poolclass=NullPool)
    attribute = "read_only" if driver == "psycopg" else "readonly"
    event.listen(engine, "connect", lambda dbapi, _record: setattr(dbapi, attribute, False))
    return engine


@pytest.mark.parametrize("driver", driver_params("postgresql", ["psycopg", "psycopg2"]))
def test_a_transaction_begun_read_write_on_a_standby_is_a_read_only_database_error(
    on_standby: URL, driver: str
) -> None:
    engine = begins_read_write(on_standby, driver)
    try:
        with Ledger(engine=engine) as ledger:
            with pytest.raises(ReadOnlyDatabaseError) as raised, ledger.unit_of_work() as uow:
                uow.sessions.get("kept")
            assert raised.value.__cause__ is not None
            assert sqlstate(raised.value.__cause__) == "0A000"
    finally:
        engine.dispose()


def test_a_sync_ledger_reads_sessions_messages_and_usage_on_the_standby(seeded: Standby) -> None:
    with Ledger(seeded.standby) as ledger:
        assert ledger.sessions.get("on-the-primary").title == "seeded"
        assert [m.content for m in ledger.messages.all("on-the-primary")] == ["hello"]
        assert ledger.steps.usage(session_id="on-the-primary").total_tokens == 7
        assert [s.id for s in ledger.sessions.list(user_id="ada").items] == ["on-the-primary"]
        with ledger.unit_of_work(readonly=True) as uow:
            assert uow.sessions.get("on-the-primary").message_count == 1


async def test_an_async_ledger_reads_on_the_standby(seeded: Standby) -> None:
    async with AsyncLedger(seeded.standby) as ledger:
        assert (await ledger.sessions.get("on-the-primary")).title == "seeded"
        assert [m.content for m in await ledger.messages.all("on-the-primary")] == ["hello"]
