"""Contract: a read-only unit of work reads one consistent snapshot and never writes."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from agentledger import NewMessage, UsageError, ValidationError

from .harness import Harness, tier


class _Signal:
    """A one-shot event between the workers of ``Harness.concurrently``, in either mode."""

    def __init__(self, mode: str) -> None:
        self._task_event = asyncio.Event() if mode == "async" else None
        self._thread_event = threading.Event()

    def set(self) -> None:
        if self._task_event is not None:
            self._task_event.set()
        self._thread_event.set()

    async def wait(self, timeout: float) -> bool:
        """Whether it was set within ``timeout`` seconds."""
        if self._task_event is None:
            return self._thread_event.wait(timeout)
        try:
            await asyncio.wait_for(self._task_event.wait(), timeout)
        except TimeoutError:
            return False
        return True


@tier("driver")
class ReadOnlyUnitOfWorkContract:
    """``unit_of_work(readonly=True)``."""

    async def test_it_sees_neither_half_of_a_concurrent_write(self, harness: Harness) -> None:
        ledger = harness.ledger
        record = await ledger.sessions.create("snap", app_name="app", state={"half": 0})
        await ledger.messages.append(record, NewMessage(role="user", content="before"))
        reading, written = _Signal(harness.mode), _Signal(harness.mode)
        seen: dict[str, Any] = {}

        async def reader() -> None:
            async with ledger.unit_of_work(readonly=True) as uow:
                first = await uow.sessions.get("snap")
                reading.set()
                # Where the database lets a writer commit past a reader (WAL, MVCC), the
                # write is committed before the second read; elsewhere it waits for us.
                seen["committed first"] = await written.wait(timeout=3)
                seen["session"] = (first, await uow.sessions.get("snap"))
                seen["messages"] = [m.content for m in await uow.messages.all("snap")]
                seen["app"] = (await uow.app_state.get("app")).revision

        async def writer() -> None:
            await reading.wait(timeout=30)
            await ledger.messages.append(
                "snap",
                NewMessage(role="user", content="after"),
                state_delta={"set": {"half": 1}},
                app_state_delta={"set": {"half": 2}},
            )
            written.set()

        async def worker(index: int) -> None:
            await (reader() if index == 0 else writer())

        await harness.concurrently(2, worker)
        first, second = seen["session"]
        assert first == second and second.state == {"half": 0}
        assert seen["messages"] == ["before"]
        assert seen["app"] == 0
        assert [m.content for m in await ledger.messages.all("snap")] == ["before", "after"]

    @tier("logic")
    async def test_a_write_is_refused(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("ro")
        async with harness.ledger.unit_of_work(readonly=True) as uow:
            assert (await uow.sessions.get("ro")).id == "ro"
            with pytest.raises(UsageError):
                await uow.sessions.create("nope")
            with pytest.raises(UsageError):
                await uow.messages.append("ro", NewMessage(role="user", content="x"))
            with pytest.raises(UsageError):
                await uow.app_state.merge("app", {"set": {"k": 1}})
        assert not await harness.ledger.sessions.exists("nope")

    async def test_every_read_works_inside_it(self, harness: Harness) -> None:
        ledger = harness.ledger
        await ledger.sessions.create("reads", external_key="k", app_name="app", user_id="u")
        await ledger.messages.append("reads", NewMessage(role="user", content="hi"))
        async with ledger.unit_of_work(readonly=True) as uow:
            assert (await uow.sessions.get_by_key("k", app_name="app", user_id="u")).id == "reads"
            assert len((await uow.sessions.list(include=["state"])).items) == 1
            assert [m.content for m in await uow.messages.last("reads", 5)] == ["hi"]
            assert (await uow.user_state.get("app", "u")).revision == 0
            assert await uow.steps.count("reads") == 0

    @tier("logic")
    async def test_it_cannot_join_a_caller_transaction(self, harness: Harness) -> None:
        async with harness.require("caller_transaction")() as caller:
            with pytest.raises(ValidationError) as raised:
                async with harness.ledger.unit_of_work(join=caller.join, readonly=True):
                    pass
        assert raised.value.path == "readonly"
