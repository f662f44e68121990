"""MariaDB/MySQL creators of one session id take turns under a named lock
(``creators_take_turns``). A named lock belongs to the server session, not to the
transaction, so a deadlock inside the turn must not leave it on a pooled connection: the
caller gets the retryable serialization conflict, the connection that held the lock is
invalidated rather than pooled, and the next creator of that id gets its turn at once.

The deadlock is a real one on one server: writer B inserts the id (and enough other rows
to be the heavier transaction, which InnoDB keeps), creator A, which already wrote a row
of its own, waits for B's insert inside its turn, and B then asks for A's row."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pymysql
import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger import AsyncLedger, ConflictError, Ledger

from ..databases import migrated_database

pytestmark = pytest.mark.mysql

WAIT_S = 30
"""How long a step of the scenario may take before the test fails: far past a lock wait
on a loaded machine, and a bound on a test that could otherwise hang."""
HEAVY_ROWS = 30
"""Rows writer B inserts before the id, so that InnoDB picks creator A as the victim."""


@pytest.fixture(scope="module")
def mariadb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[URL]:
    with migrated_database("mysql", tmp_path_factory.mktemp("creators")) as url:
        yield url


def lock_name(id: str) -> str:
    return "agentledger_create_" + hashlib.sha256(id.encode()).hexdigest()[:40]


def lock_holder(url: URL, id: str) -> int | None:
    """The server connection holding the creators' lock of ``id``, if any."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            found = connection.execute(
                text("SELECT IS_USED_LOCK(:name)"), {"name": lock_name(id)}
            ).scalar()
            return None if found is None else int(found)
    finally:
        engine.dispose()


def wait_until_a_transaction_waits_for_a_lock(url: URL) -> None:
    engine = create_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    deadline = time.monotonic() + WAIT_S
    try:
        with engine.connect() as connection:
            while time.monotonic() < deadline:
                waiting = connection.execute(
                    text(
                        "SELECT COUNT(*) FROM information_schema.innodb_trx "
                        "WHERE trx_state = 'LOCK WAIT'"
                    )
                ).scalar()
                if waiting:
                    return
                time.sleep(0.01)
    finally:
        engine.dispose()
    pytest.fail("creator A never waited for writer B's insert")


class Rollback(Exception):
    """Ends writer B's unit of work without committing it."""


def deadlock_creator_a(url: URL, creator_a: Callable[[str, str, threading.Event], None]) -> Any:
    """Run creator A (``creator_a(own_id, contested_id, wrote_own)`` in a thread) into a
    deadlock with writer B inside A's turn at creating ``contested_id``; B then rolls
    back, so the id is still free. Returns the contested id and what A raised."""
    contested, own = f"contested-{uuid.uuid4().hex[:8]}", f"own-{uuid.uuid4().hex[:8]}"
    raised: list[BaseException] = []
    wrote_own = threading.Event()

    def run_a() -> None:
        try:
            creator_a(own, contested, wrote_own)
        except BaseException as error:
            raised.append(error)

    with Ledger(url) as writer_b:
        with pytest.raises(Rollback), writer_b.unit_of_work() as uow_b:
            for n in range(HEAVY_ROWS):
                uow_b.sessions.create(f"heavy-{uuid.uuid4().hex[:8]}-{n}")
            uow_b.sessions.create(contested)
            thread_a = threading.Thread(target=run_a, daemon=True)
            thread_a.start()
            assert wrote_own.wait(WAIT_S), "creator A never wrote its own row"
            wait_until_a_transaction_waits_for_a_lock(url)
            uow_b.session.execute(
                text("SELECT id FROM agentledger_sessions WHERE id = :id FOR UPDATE"), {"id": own}
            ).all()
            raise Rollback
        thread_a.join(WAIT_S)
        assert not thread_a.is_alive(), "creator A is still waiting"
    return contested, raised


def invalidations_of(engine: Any) -> list[BaseException | None]:
    seen: list[BaseException | None] = []
    event.listen(engine, "invalidate", lambda _conn, _record, error: seen.append(error))
    return seen


def sync_creator(url: URL, invalidated: list[list[BaseException | None]]) -> Any:
    def creator_a(own: str, contested: str, wrote_own: threading.Event) -> None:
        with Ledger(url, lock_timeout=WAIT_S) as ledger:
            invalidated.append(invalidations_of(ledger.engine))
            with ledger.unit_of_work() as uow:
                uow.sessions.create(own)
                wrote_own.set()
                uow.sessions.get_or_create(contested)

    return creator_a


def async_creator(url: URL, invalidated: list[list[BaseException | None]]) -> Any:
    async def scenario(own: str, contested: str, wrote_own: threading.Event) -> None:
        async_url = url.set(drivername="mysql+aiomysql")
        async with AsyncLedger(async_url, lock_timeout=WAIT_S) as ledger:
            invalidated.append(invalidations_of(ledger.engine.sync_engine))
            async with ledger.unit_of_work() as uow:
                await uow.sessions.create(own)
                wrote_own.set()
                await uow.sessions.get_or_create(contested)

    def creator_a(own: str, contested: str, wrote_own: threading.Event) -> None:
        asyncio.run(scenario(own, contested, wrote_own))

    return creator_a


CREATORS = [
    pytest.param(sync_creator, id="pymysql"),
    pytest.param(async_creator, id="aiomysql"),
]


@pytest.mark.parametrize("make_creator", CREATORS)
def test_a_deadlock_in_a_creators_turn_is_a_retryable_serialization_conflict(
    mariadb: URL, make_creator: Callable[..., Any]
) -> None:
    _, raised = deadlock_creator_a(mariadb, make_creator(mariadb, []))
    (error,) = raised
    assert isinstance(error, ConflictError), repr(error)
    assert error.reason == "serialization"
    assert error.retryable


@pytest.mark.parametrize("make_creator", CREATORS)
def test_the_connection_that_held_the_turn_is_invalidated_not_pooled(
    mariadb: URL, make_creator: Callable[..., Any]
) -> None:
    invalidated: list[list[BaseException | None]] = []
    contested, _ = deadlock_creator_a(mariadb, make_creator(mariadb, invalidated))
    ((cause,),) = invalidated
    assert cause is not None
    assert lock_holder(mariadb, contested) is None


@pytest.mark.parametrize("make_creator", CREATORS)
def test_the_next_creator_of_the_id_gets_its_turn_without_waiting_out_the_lock(
    mariadb: URL, make_creator: Callable[..., Any]
) -> None:
    contested, _ = deadlock_creator_a(mariadb, make_creator(mariadb, []))
    # A one-second lock timeout: a turn left held would raise DatabaseLockedError here.
    with Ledger(mariadb, lock_timeout=1) as next_creator:
        record, created = next_creator.sessions.get_or_create(contested)
    assert created
    assert record.id == contested


def release_fails_once(engine: Any) -> list[str]:
    """The next RELEASE_LOCK on ``engine`` fails as on a Galera node whose transaction
    a replicated one aborted (1213 at the next statement); returns the statements
    refused."""
    refused: list[str] = []

    def before(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if "RELEASE_LOCK" in statement and not refused:
            refused.append(statement)
            raise pymysql.err.OperationalError(1213, "Deadlock found when trying to get lock")

    event.listen(engine, "before_cursor_execute", before)
    return refused


def test_a_release_that_fails_invalidates_the_connection_and_frees_the_turn(
    mariadb: URL,
) -> None:
    contested = f"contested-{uuid.uuid4().hex[:8]}"
    with Ledger(mariadb) as ledger:
        invalidated = invalidations_of(ledger.engine)
        refused = release_fails_once(ledger.engine)
        with pytest.raises(ConflictError) as raised, ledger.unit_of_work() as uow:
            uow.sessions.get_or_create(contested)
        assert raised.value.reason == "serialization"
        assert refused and len(invalidated) == 1
        assert lock_holder(mariadb, contested) is None
        assert not ledger.sessions.exists(contested)


def test_an_async_release_that_fails_invalidates_the_connection_and_frees_the_turn(
    mariadb: URL,
) -> None:
    contested = f"contested-{uuid.uuid4().hex[:8]}"

    async def scenario() -> tuple[ConflictError, int]:
        async with AsyncLedger(mariadb.set(drivername="mysql+aiomysql")) as ledger:
            invalidated = invalidations_of(ledger.engine.sync_engine)
            release_fails_once(ledger.engine.sync_engine)
            with pytest.raises(ConflictError) as raised:
                async with ledger.unit_of_work() as uow:
                    await uow.sessions.get_or_create(contested)
            return raised.value, len(invalidated)

    error, invalidated = asyncio.run(scenario())
    assert (error.reason, invalidated) == ("serialization", 1)
    assert lock_holder(mariadb, contested) is None


def test_a_ledger_level_creation_whose_release_fails_is_retried_and_creates(
    mariadb: URL,
) -> None:
    contested = f"contested-{uuid.uuid4().hex[:8]}"
    with Ledger(mariadb) as ledger:
        refused = release_fails_once(ledger.engine)
        record, created = ledger.sessions.get_or_create(contested)
        assert (record.id, created, len(refused)) == (contested, True, 1)
        assert lock_holder(mariadb, contested) is None  # while the ledger's pool is open


def test_after_a_failed_release_another_creator_gets_its_turn_without_waiting_out_the_lock(
    mariadb: URL,
) -> None:
    contested = f"contested-{uuid.uuid4().hex[:8]}"
    with Ledger(mariadb) as ledger:
        release_fails_once(ledger.engine)
        with pytest.raises(ConflictError), ledger.unit_of_work() as uow:
            uow.sessions.get_or_create(contested)
        # The first ledger's pool is still open. A one-second lock timeout: a turn it
        # kept would raise DatabaseLockedError here.
        with Ledger(mariadb, lock_timeout=1) as next_creator:
            record, created = next_creator.sessions.get_or_create(contested)
        assert (record.id, created) == (contested, True)
