"""A call cancelled mid-transaction leaves its pooled connection in no state the next
call inherits.

asyncpg records a transaction when its BEGIN is sent and forgets nothing when the task
is cancelled before the answer: the next transaction on that connection became a
SAVEPOINT inside the one the server had begun, and its COMMIT released the savepoint
and stored nothing, while the call said it had. SQLAlchemy's transport throws such a
connection away; driver SQL (LangGraph's saver calls) now does too. Each test cancels
a call right after the server ran its BEGIN, then writes on the same pooled connection
(a pool of one) and reads the write back from another connection."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from sqlalchemy.engine import URL

from agentledger import AsyncLedger

from ..databases import driver_params, migrated_database, session_stored

pytestmark = pytest.mark.postgresql

ONE_CONNECTION = {"isolation_level": "REPEATABLE READ", "pool_size": 1, "max_overflow": 0}
"""A pool of one connection, at REPEATABLE READ: the ledger's reads then run in a
transaction (at READ COMMITTED they run in autocommit, with no BEGIN to cancel)."""


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[URL]:
    with migrated_database("postgresql", tmp_path_factory.mktemp("cancelled")) as url:
        yield url


@pytest.fixture
def cancel_after_the_next_begin(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Arms a fault: the next BEGIN asyncpg sends runs on the server, and the task is
    cancelled before it hears the answer."""
    import asyncpg.connection  # the test's driver param skips where it is missing

    execute = asyncpg.connection.Connection.execute
    armed = [False]

    async def begun_then_cancelled(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        result = await execute(self, query, *args, **kwargs)
        if armed[0] and query.startswith("BEGIN"):
            armed[0] = False
            raise asyncio.CancelledError
        return result

    monkeypatch.setattr(asyncpg.connection.Connection, "execute", begun_then_cancelled)
    return lambda: armed.__setitem__(0, True)


def cancelled_then_written(
    url: URL, arm: Callable[[], None], call: Callable[[AsyncLedger], Awaitable[Any]]
) -> str:
    """Cancel ``call`` after its BEGIN ran, then create a session on the same pooled
    connection; its id."""
    id = f"after-a-cancel-{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        async with AsyncLedger(
            url.set(drivername="postgresql+asyncpg"), engine_options=ONE_CONNECTION
        ) as ledger:
            await ledger.sessions.exists("warm-up")
            arm()
            with pytest.raises(asyncio.CancelledError):
                await call(ledger)
            await ledger.sessions.create(id)

    asyncio.run(scenario())
    return id


@pytest.mark.parametrize("driver", driver_params("postgresql", ["asyncpg"]))
def test_a_write_after_a_driver_sql_call_cancelled_at_its_begin_is_stored(
    postgres: URL, driver: str, cancel_after_the_next_begin: Callable[[], None]
) -> None:
    id = cancelled_then_written(
        postgres, cancel_after_the_next_begin, lambda ledger: ledger.langgraph().get("t", "")
    )
    assert session_stored(postgres, id)


@pytest.mark.parametrize("driver", driver_params("postgresql", ["asyncpg"]))
def test_a_write_after_a_sqlalchemy_call_cancelled_at_its_begin_is_stored(
    postgres: URL, driver: str, cancel_after_the_next_begin: Callable[[], None]
) -> None:
    id = cancelled_then_written(
        postgres, cancel_after_the_next_begin, lambda ledger: ledger.sessions.exists("x")
    )
    assert session_stored(postgres, id)
