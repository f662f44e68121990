"""One ledger, used the way servers use it: worker threads each running an event loop
of its own, ``asyncio.run`` per task one after another, a process forked after the
ledger was built. Every acknowledged write is stored once, nothing hangs (each test
joins its threads with a deadline and fails past it), and no connection or lock made
for one loop or process is used by another."""

from __future__ import annotations

import asyncio
import gc
import threading
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from agentledger import AsyncLedger, Ledger, NewMessage, UsageError, migrations

from ..databases import scratch_database
from ..loops import DEADLINE_S, forked, in_threads, one_after_another

THREADS, APPENDS = 5, 8


@pytest.fixture
def url(each_database: str) -> str:
    """A migrated scratch database of each kind."""
    return each_database


async def append_turns(ledger: AsyncLedger, session_id: str, writer: int) -> int:
    for turn in range(APPENDS):
        message = NewMessage(role="user", content=f"w{writer} t{turn}")
        await ledger.messages.append(session_id, message)
    return APPENDS


async def contents(ledger: AsyncLedger, session_id: str) -> list[str]:
    page = await ledger.messages.last(session_id, 1000)
    return [str(message.content) for message in page]


def test_threads_each_on_its_own_loop_append_to_one_session_and_lose_nothing(url: str) -> None:
    ledger = AsyncLedger(url)
    asyncio.run(ledger.sessions.create("shared"))
    acknowledged = sum(in_threads(THREADS, lambda i: append_turns(ledger, "shared", i)))
    stored = asyncio.run(contents(ledger, "shared"))
    assert acknowledged == len(stored) == THREADS * APPENDS
    assert sorted(stored) == sorted(f"w{w} t{t}" for w in range(THREADS) for t in range(APPENDS))
    for writer in range(THREADS):  # each writer's turns in its order
        mine = [text for text in stored if text.startswith(f"w{writer} ")]
        assert mine == [f"w{writer} t{t}" for t in range(APPENDS)]
    asyncio.run(ledger.close())


def test_threads_each_on_its_own_loop_write_sessions_of_their_own(url: str) -> None:
    ledger = AsyncLedger(url)

    async def own(i: int) -> int:
        await ledger.sessions.create(f"own-{i}")
        return await append_turns(ledger, f"own-{i}", i)

    assert sum(in_threads(THREADS, own)) == THREADS * APPENDS
    counts = [asyncio.run(ledger.sessions.get(f"own-{i}")).message_count for i in range(THREADS)]
    assert counts == [APPENDS] * THREADS
    asyncio.run(ledger.close())


def test_units_of_work_in_threads_each_on_its_own_loop_commit_once_each(url: str) -> None:
    ledger = AsyncLedger(url)
    asyncio.run(ledger.sessions.create("uow"))

    async def in_unit(i: int) -> int:
        async with ledger.unit_of_work() as uow:
            await uow.messages.append("uow", NewMessage(role="user", content=f"u{i}"))
        return 1

    assert sum(in_threads(THREADS, in_unit)) == THREADS
    assert sorted(asyncio.run(contents(ledger, "uow"))) == sorted(f"u{i}" for i in range(THREADS))
    asyncio.run(ledger.close())


def test_asyncio_run_again_and_again_on_one_ledger_works_every_time(url: str) -> None:
    ledger = AsyncLedger(url)

    async def turn(i: int) -> int:
        if i == 0:
            await ledger.sessions.create("runs")
        await ledger.messages.append("runs", NewMessage(role="user", content=f"r{i}"))
        async with ledger.unit_of_work() as uow:
            await uow.messages.append("runs", NewMessage(role="assistant", content=f"a{i}"))
        return (await ledger.sessions.get("runs")).message_count

    assert one_after_another(3, turn) == [2, 4, 6]
    asyncio.run(ledger.close())


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_loops_closed_without_shutting_down_close_their_connections_first(url: str) -> None:
    # new_event_loop, run, close: no shutdown_asyncgens (the SDKs' own tests, many servers).
    ledger = AsyncLedger(url)

    def in_a_loop_of_its_own(i: int) -> int:
        loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(append_turns(ledger, "manual", i))
        finally:
            loop.close()

    asyncio.run(ledger.sessions.create("manual"))
    done = [in_a_loop_of_its_own(i) for i in range(3)]
    gc.collect()  # a connection left to the collector would complain here
    assert sum(done) == asyncio.run(ledger.sessions.get("manual")).message_count
    asyncio.run(ledger.close())


def test_a_pool_waited_on_in_one_loop_serves_the_next_loop(url: str) -> None:
    # An exhausted pool waits on an asyncio queue, which binds to the loop that waits.
    ledger = AsyncLedger(url, engine_options={"pool_size": 1, "max_overflow": 0})
    asyncio.run(ledger.sessions.create("queued"))

    async def crowd(i: int) -> int:
        await asyncio.gather(*(append_turns(ledger, "queued", i * 10 + n) for n in range(4)))
        return 4 * APPENDS

    assert one_after_another(2, crowd) == [4 * APPENDS, 4 * APPENDS]
    assert asyncio.run(ledger.sessions.get("queued")).message_count == 8 * APPENDS
    asyncio.run(ledger.close())


def test_many_tasks_of_one_loop_share_the_loop_s_engine(url: str) -> None:
    async def main() -> list[str]:
        async with AsyncLedger(url) as ledger:
            await ledger.sessions.create("tasks")
            await asyncio.gather(*(append_turns(ledger, "tasks", i) for i in range(THREADS)))
            return await contents(ledger, "tasks")

    assert len(asyncio.run(main())) == THREADS * APPENDS


@pytest.mark.postgresql
def test_a_borrowed_pooled_engine_used_from_a_second_running_loop_is_refused(
    tmp_path: Path,
) -> None:
    with scratch_database("postgresql", str(tmp_path)) as found:
        migrations.upgrade(found)
        engine = create_async_engine(found.set(drivername="postgresql+asyncpg"))
        ledger = AsyncLedger(engine=engine)
        started, release = threading.Event(), threading.Event()

        async def hold_the_first_loop() -> None:
            await ledger.sessions.create("borrowed")
            started.set()
            await asyncio.to_thread(release.wait, DEADLINE_S)

        holder = threading.Thread(target=asyncio.run, args=(hold_the_first_loop(),), daemon=True)
        holder.start()
        try:
            assert started.wait(DEADLINE_S)
            with pytest.raises(UsageError, match="poolclass=NullPool"):
                asyncio.run(ledger.sessions.get("borrowed"))
        finally:
            release.set()
            holder.join(DEADLINE_S)
        asyncio.run(engine.dispose())


@pytest.mark.postgresql
def test_a_borrowed_engine_without_a_pool_serves_every_loop(tmp_path: Path) -> None:
    with scratch_database("postgresql", str(tmp_path)) as found:
        migrations.upgrade(found)
        engine = create_async_engine(found.set(drivername="postgresql+asyncpg"), poolclass=NullPool)
        ledger = AsyncLedger(engine=engine)
        asyncio.run(ledger.sessions.create("unpooled"))
        done = in_threads(THREADS, lambda i: append_turns(ledger, "unpooled", i))
        assert sum(done) == THREADS * APPENDS
        assert asyncio.run(ledger.sessions.get("unpooled")).message_count == THREADS * APPENDS


# -- a process forked after the ledger was built -------------------------------------------


def sync_turns(ledger: Ledger, session_id: str) -> None:
    for turn in range(APPENDS * 3):
        ledger.messages.append(session_id, NewMessage(role="user", content=f"t{turn}"))


def test_a_sync_ledger_shared_by_threads_loses_nothing(url: str) -> None:
    ledger = Ledger(url)
    ledger.sessions.create("threads")

    async def writer(i: int) -> int:  # blocking calls: the sync ledger needs no loop
        for turn in range(APPENDS):
            ledger.messages.append("threads", NewMessage(role="user", content=f"w{i} t{turn}"))
        return APPENDS

    assert sum(in_threads(THREADS, writer)) == THREADS * APPENDS
    stored = [str(m.content) for m in ledger.messages.all("threads")]
    assert sorted(stored) == sorted(f"w{w} t{t}" for w in range(THREADS) for t in range(APPENDS))
    ledger.close()


def test_a_sync_ledger_used_before_and_after_fork_shares_no_connection(url: str) -> None:
    ledger = Ledger(url)
    ledger.sessions.create("parent")
    ledger.sessions.create("child")  # the pool now holds a connection
    with forked(lambda: sync_turns(ledger, "child")):
        sync_turns(ledger, "parent")
    assert ledger.sessions.get("parent").message_count == APPENDS * 3
    assert ledger.sessions.get("child").message_count == APPENDS * 3
    ledger.close()


def test_an_async_ledger_used_before_and_after_fork_works_in_the_child(url: str) -> None:
    ledger = AsyncLedger(url)
    asyncio.run(ledger.sessions.create("parent"))
    asyncio.run(ledger.sessions.create("child"))

    with forked(lambda: asyncio.run(append_turns(ledger, "child", 0))):
        asyncio.run(append_turns(ledger, "parent", 1))
    counts = [asyncio.run(ledger.sessions.get(name)).message_count for name in ("parent", "child")]
    assert counts == [APPENDS, APPENDS]
    asyncio.run(ledger.close())
