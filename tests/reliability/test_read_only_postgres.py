"""A read-only unit of work on PostgreSQL is READ ONLY for its own transaction only.

SQLAlchemy's ``postgresql_readonly`` option set psycopg's (and psycopg2's, and pg8000's)
connection to explicit READ WRITE when it went back to the pool, so every later
transaction on it began ``READ WRITE``: a hot standby refused each of them (0A000,
"cannot set transaction read-write mode during recovery"), and a server whose
``default_transaction_read_only`` is on took writes it refuses otherwise. Here such a
server stands in for a standby (it reads, and refuses writes with 25006), on every
PostgreSQL driver; a write it refuses is a ``ReadOnlyDatabaseError``."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
import sqlalchemy.event
from sqlalchemy import event, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError

from agentledger import AsyncLedger, Ledger, NewMessage, ReadOnlyDatabaseError
from agentledger._translate import sqlstate
from agentledger.testing.harness import SyncAdapter

from ..databases import driver_params, migrated_database, session_stored

pytestmark = pytest.mark.postgresql

READ_ONLY_SERVER = {
    "psycopg": {"options": "-c default_transaction_read_only=on"},
    "psycopg2": {"options": "-c default_transaction_read_only=on"},
    "pg8000": {"startup_params": {"default_transaction_read_only": "on"}},
    "asyncpg": {"server_settings": {"default_transaction_read_only": "on"}},
    "psycopg_async": {"options": "-c default_transaction_read_only=on"},
}
"""Connection arguments that make every transaction of a connection read-only by
default, per driver: what a hot standby does to each transaction."""
ASYNC_DRIVERS = {"asyncpg", "psycopg_async"}
DRIVERS = list(READ_ONLY_SERVER)


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[URL]:
    with migrated_database("postgresql", tmp_path_factory.mktemp("read-only")) as url:
        with Ledger(url) as ledger:
            ledger.sessions.create("kept")
            ledger.messages.append("kept", NewMessage(role="user", content="hello"))
        yield url


def ledger_on(url: URL, driver: str, *, read_only_server: bool) -> Any:
    """A ledger on ``driver`` with the async API's shape (a sync one behind
    ``SyncAdapter``), on a server read-only by default when ``read_only_server``."""
    options = {"connect_args": READ_ONLY_SERVER[driver]} if read_only_server else None
    address = url.set(drivername=f"postgresql+{driver}")
    if driver in ASYNC_DRIVERS:
        return AsyncLedger(address, engine_options=options)
    return SyncAdapter(Ledger(address, engine_options=options))


def run(url: URL, driver: str, scenario: Callable[[Any], Awaitable[Any]], **options: Any) -> Any:
    async def opened() -> Any:
        ledger = ledger_on(url, driver, **options)
        try:
            return await scenario(ledger)
        finally:
            await ledger.close()

    return asyncio.run(opened())


async def read_only_unit_of_work(ledger: Any) -> None:
    async with ledger.unit_of_work(readonly=True) as uow:
        assert (await uow.sessions.get("kept")).id == "kept"


async def write_in_a_unit_of_work(ledger: Any, id: str) -> None:
    async with ledger.unit_of_work() as uow:
        await uow.sessions.create(id)


@pytest.mark.parametrize("driver", driver_params("postgresql", DRIVERS))
def test_a_write_a_read_only_server_refuses_is_a_read_only_database_error(
    postgres: URL, driver: str
) -> None:
    id = f"refused-{uuid.uuid4().hex[:8]}"

    async def scenario(ledger: Any) -> None:
        with pytest.raises(ReadOnlyDatabaseError) as raised:
            await write_in_a_unit_of_work(ledger, id)
        assert not raised.value.retryable

    run(postgres, driver, scenario, read_only_server=True)
    assert not session_stored(postgres, id)


@pytest.mark.parametrize("driver", driver_params("postgresql", DRIVERS))
def test_after_a_read_only_unit_of_work_the_server_still_decides_the_next_transactions_mode(
    postgres: URL, driver: str
) -> None:
    id = f"after-read-only-{uuid.uuid4().hex[:8]}"

    async def scenario(ledger: Any) -> None:
        await read_only_unit_of_work(ledger)
        with pytest.raises(ReadOnlyDatabaseError):
            await write_in_a_unit_of_work(ledger, id)
        with pytest.raises(ReadOnlyDatabaseError):
            await ledger.run(lambda uow: uow.sessions.create(id))
        async with ledger.unit_of_work() as uow:  # a read in a write unit of work
            assert (await uow.sessions.get("kept")).id == "kept"

    run(postgres, driver, scenario, read_only_server=True)
    assert not session_stored(postgres, id)


@pytest.mark.parametrize("driver", driver_params("postgresql", DRIVERS))
def test_after_a_snapshot_read_a_write_is_refused_as_before_it(postgres: URL, driver: str) -> None:
    id = f"after-snapshot-{uuid.uuid4().hex[:8]}"

    async def scenario(ledger: Any) -> None:
        conversation = await ledger.messages.conversation("kept")
        assert [m.content for m in conversation.messages] == ["hello"]
        with pytest.raises(ReadOnlyDatabaseError):
            await write_in_a_unit_of_work(ledger, id)

    run(postgres, driver, scenario, read_only_server=True)
    assert not session_stored(postgres, id)


@pytest.mark.parametrize("driver", driver_params("postgresql", DRIVERS))
def test_a_read_only_unit_of_work_is_read_only_on_the_server_and_only_it(
    postgres: URL, driver: str
) -> None:
    id = f"written-after-{uuid.uuid4().hex[:8]}"

    async def scenario(ledger: Any) -> str | None:
        with pytest.raises(DBAPIError) as refused:
            async with ledger.unit_of_work(readonly=True) as uow:
                result = uow.session.execute(text("CREATE TEMPORARY TABLE scratch (x int)"))
                if driver in ASYNC_DRIVERS:
                    await result
        await write_in_a_unit_of_work(ledger, id)
        return sqlstate(refused.value)

    assert run(postgres, driver, scenario, read_only_server=False) == "25006"
    assert session_stored(postgres, id)


def test_a_connection_whose_read_only_setting_cannot_be_put_back_is_not_pooled(
    postgres: URL, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Ledger(postgres) as ledger:
        dialect = ledger.engine.dialect
        set_readonly = dialect.set_readonly  # type: ignore[attr-defined]

        def refuse_to_put_back(connection: Any, value: Any) -> None:
            if value is not True:
                raise RuntimeError("the driver refused")
            set_readonly(connection, value)

        invalidated: list[BaseException | None] = []
        event.listen(ledger.engine, "invalidate", lambda _c, _r, error: invalidated.append(error))
        monkeypatch.setattr(dialect, "set_readonly", refuse_to_put_back)
        with ledger.unit_of_work(readonly=True) as uow:
            uow.sessions.get("kept")
        monkeypatch.undo()
        assert [str(error) for error in invalidated] == ["the driver refused"]
        id = f"written-{uuid.uuid4().hex[:8]}"
        ledger.sessions.create(id)  # on a new connection, beginning as the server's default
    assert session_stored(postgres, id)


@pytest.mark.parametrize("driver", driver_params("postgresql", DRIVERS))
def test_a_pool_the_event_registry_takes_for_a_dead_one_still_puts_the_setting_back(
    postgres: URL, driver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLAlchemy's event registry keys a listener by the ``id()`` of its target, so a
    new pool at the address of a freed one whose listeners the garbage collector had
    not reached yet looked as if it had them (``event.contains``). Here the registry
    says so of every pool: the write after a read-only unit of work on the same pooled
    connection must still begin as the server decides."""
    monkeypatch.setattr(sqlalchemy.event, "contains", lambda *_args, **_kwargs: True)
    id = f"after-a-lookalike-pool-{uuid.uuid4().hex[:8]}"

    async def scenario(ledger: Any) -> None:
        await read_only_unit_of_work(ledger)
        await write_in_a_unit_of_work(ledger, id)

    run(postgres, driver, scenario, read_only_server=False)
    assert session_stored(postgres, id)
