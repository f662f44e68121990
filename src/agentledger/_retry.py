"""The retry policy of ``ledger.run``: which errors, and how long to wait between tries."""

from __future__ import annotations

import random
from collections.abc import Iterator

from .errors import AgentLedgerError, ConflictError, ValidationError

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
