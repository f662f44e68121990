"""Running test code the way servers run it: threads each with an event loop of its
own, ``asyncio.run`` again and again, a forked child. Each helper has a deadline: a
hang fails the test instead of hanging the suite."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")

DEADLINE_S = 60
"""How long the threads or the child of one test may take before it fails as hung."""


def in_threads(count: int, work: Callable[[int], Awaitable[T]]) -> list[T]:
    """``asyncio.run(work(i))`` in ``count`` threads at once, each on a loop of its own;
    their results, or the first error. Fails when a thread is still running at the
    deadline (a hang), instead of hanging the suite."""
    results: dict[int, T] = {}
    errors: list[BaseException] = []

    def thread(i: int) -> None:
        try:
            results[i] = asyncio.run(work(i))
        except BaseException as error:  # reported to the test below
            errors.append(error)

    threads = [threading.Thread(target=thread, args=(i,), daemon=True) for i in range(count)]
    for each in threads:
        each.start()
    for each in threads:
        each.join(timeout=DEADLINE_S)
    assert not any(each.is_alive() for each in threads), "a thread hung past the deadline"
    if errors:
        raise errors[0]
    return [results[i] for i in range(count)]


def one_after_another(count: int, work: Callable[[int], Awaitable[T]]) -> list[T]:
    """``asyncio.run(work(i))`` ``count`` times in a row, a new loop each (a script, a
    notebook cell, a task queue's worker), in a thread joined with the deadline."""

    async def each(_: int) -> list[T]:
        return [await asyncio.to_thread(asyncio.run, work(i)) for i in range(count)]  # type: ignore[arg-type]

    return in_threads(1, each)[0]


@contextmanager
def forked(child: Callable[[], None]) -> Iterator[int]:
    """Run ``child`` in a forked process while the block runs in this one; the child's
    exit status is checked after (0: its ``child`` returned)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        status = 0
        try:
            child()
        except BaseException:
            import traceback

            traceback.print_exc()
            status = 1
        os._exit(status)
    yield pid
    waited = _wait(pid)
    assert waited == 0, f"the forked child failed (status {waited})"


def _wait(pid: int) -> int:
    for _ in range(DEADLINE_S * 10):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        threading.Event().wait(0.1)
    os.kill(pid, 9)
    raise AssertionError("the forked child hung past the deadline")
