"""The retry policy: which errors are worth another try, and how long to wait between tries."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import TypeVar

from ._checks import bounded_int
from .errors import (
    AgentLedgerError,
    CommitUnknownError,
    ConflictError,
    DatabaseError,
    DatabaseLockedError,
    DatabaseUnavailableError,
)

R = TypeVar("R")
TRANSIENT_RETRIES = 3
logger = logging.getLogger("agentledger.retry")
"""Each retry is a warning here: what was retried, which attempt comes, and why."""

BASE_DELAY_S = 0.01
MAX_DELAY_S = 1.0


def backoff_delay(attempt: int) -> float:
    """The delay after failed attempt ``attempt`` (0 for the first). Full jitter (a
    random delay up to an exponentially growing cap) keeps retrying writers from
    colliding again in lockstep."""
    return random.uniform(0, min(MAX_DELAY_S, BASE_DELAY_S * 2**attempt))


def should_retry(error: BaseException) -> bool:
    """``ledger.run``'s rule: an error marked retryable (a stale or serialization
    conflict, a lost connection before the commit, a lock refused at once) is worth
    another try; a conflict that cannot succeed (``exists``, ``duplicate``...), a lock
    wait that ran out and a commit of unknown outcome are raised at once."""
    return isinstance(error, AgentLedgerError) and error.retryable


def is_transient(error: BaseException) -> bool:
    """A failure that rolled the whole transaction back and says nothing about the data:
    a deadlock or serialization failure, a lock refused at once, a prepared statement
    gone stale after a schema change. Running the same single-call transaction again
    is always safe. (A lost connection is not here: a COMMIT cut off mid-way leaves the
    outcome unknown, so that retry is the caller's call; nor is a lock wait that ran
    out its timeout, which a retry would only multiply.)"""
    if isinstance(error, ConflictError):
        return error.reason == "serialization"
    if isinstance(error, DatabaseLockedError):
        return error.retryable
    return type(error) is DatabaseError and error.retryable


def transient_or_replayable(replay_safe: Callable[[], bool]) -> Callable[[BaseException], bool]:
    """The rule of the ledger's own retry of one call: a transient failure, and a commit
    of unknown outcome when ``replay_safe()`` says the call's replay is harmless (an
    append whose every item has a key: the replay finds the stored rows, returns them
    and writes nothing)."""

    def retry_on(error: BaseException) -> bool:
        return is_transient(error) or (isinstance(error, CommitUnknownError) and replay_safe())

    return retry_on


def is_lost_before_commit(error: BaseException, commit_sent: bool) -> bool:
    """A connection lost (or a server gone) before the transaction's COMMIT was sent:
    the server rolled the transaction back, so running it again is safe. After the
    COMMIT was sent the outcome is unknown, and that retry is the caller's call."""
    return isinstance(error, DatabaseUnavailableError) and not commit_sent


def retrying(
    fn: Callable[[], R],
    *,
    retries: int,
    retry_on: Callable[[BaseException], bool],
    sleep: Callable[[float], None],
    what: str = "a call",
) -> R:
    """Call ``fn``; after an error ``retry_on`` accepts, wait (``sleep``: the caller's
    way of waiting, blocking or awaited) and call it again, up to ``retries`` times.
    ``what`` names the call in the warning each retry logs."""
    bounded_int(retries, "retries")
    failed = 0
    while True:
        try:
            return fn()
        except Exception as error:
            if failed >= retries or not retry_on(error):
                raise
            # Drawn only after a failure: most calls succeed at once.
            delay = backoff_delay(failed)
            logger.warning(
                "retrying %s (attempt %d of %d) in %.3f s after %s: %s",
                what,
                failed + 2,
                retries + 1,
                delay,
                type(error).__name__,
                error,
            )
        sleep(delay)
        failed += 1
