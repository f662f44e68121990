"""The retry policy of ``ledger.run``: which errors, and how long to wait between tries."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

from .errors import (
    AgentLedgerError,
    ConflictError,
    DatabaseError,
    DatabaseLockedError,
    ValidationError,
)

R = TypeVar("R")
TRANSIENT_RETRIES = 3

BASE_DELAY_S = 0.01
MAX_DELAY_S = 1.0


def backoff_delays(retries: int) -> Iterator[float | None]:
    """One item per attempt: the delay before the next attempt, None after the last.

    Full jitter (a random delay up to an exponentially growing cap) keeps retrying
    writers from colliding again in lockstep.
    """
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
        raise ValidationError(f"retries must be an int >= 0, got {retries!r}", path="retries")
    for attempt in range(retries):
        yield random.uniform(0, min(MAX_DELAY_S, BASE_DELAY_S * 2**attempt))
    yield None


def should_retry(error: BaseException) -> bool:
    """Conflicts (re-read and re-apply) and errors marked retryable are worth another try."""
    return isinstance(error, ConflictError) or (
        isinstance(error, AgentLedgerError) and error.retryable
    )


def is_transient(error: BaseException) -> bool:
    """A failure that rolled the whole transaction back and says nothing about the data:
    a deadlock or serialization failure, a lock not granted in time, a prepared
    statement gone stale after a schema change. Running the same single-call
    transaction again is always safe. (A lost connection is not here: a COMMIT cut
    off mid-way leaves the outcome unknown, so that retry is the caller's call.)"""
    if isinstance(error, ConflictError):
        return error.reason == "serialization"
    if isinstance(error, DatabaseLockedError):
        return True
    return type(error) is DatabaseError and error.retryable


def retrying(fn: Callable[[], R], retries: int = TRANSIENT_RETRIES) -> R:
    """Call ``fn``; call it again after a transient failure, up to ``retries`` times."""
    for delay in backoff_delays(retries):
        try:
            return fn()
        except AgentLedgerError as error:
            if delay is None or not is_transient(error):
                raise
        time.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


async def retrying_async(fn: Callable[[], Awaitable[R]], retries: int = TRANSIENT_RETRIES) -> R:
    """``retrying`` for a coroutine function."""
    for delay in backoff_delays(retries):
        try:
            return await fn()
        except AgentLedgerError as error:
            if delay is None or not is_transient(error):
                raise
        await asyncio.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover
