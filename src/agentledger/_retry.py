"""The retry policy: which errors are worth another try, and how long to wait between tries."""

from __future__ import annotations

import dataclasses
import logging
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from ._checks import bounded_int
from .errors import (
    AgentLedgerError,
    CommitUnknownError,
    ConflictError,
    DatabaseError,
    DatabaseLockedError,
    DatabaseUnavailableError,
    ValidationError,
)

R = TypeVar("R")
logger = logging.getLogger("agentledger.retry")
"""Each retry is a warning here (what was retried, which attempt comes, and why), and so
is a retryable failure that ran out of attempts (what gave up, after how many)."""

MAX_ATTEMPTS = 1000
"""The most attempts a policy takes: far past any useful budget, and a bound a typo
(an extra zero or three) does not pass."""
MAX_DELAY_LIMIT_S = 3600.0
"""The longest wait between attempts a policy takes: one hour."""


@dataclass(frozen=True)
class RetryPolicy:
    """How a ledger runs work again after a failure worth another try: how many times,
    and how long it waits in between. One policy serves both faces (``Ledger`` and
    ``AsyncLedger``) and both kinds of retry: the ledger's own retry of each
    ledger-level call after a transient failure (a deadlock or serialization failure,
    a lock refused at once, a connection lost before COMMIT), and ``ledger.run``'s
    retry of a whole unit of work after any retryable error.

    The wait after failed attempt ``n`` (0 for the first) is drawn from an
    exponentially growing cap, ``min(max_delay, base_delay * 2**n)``: with ``jitter``
    1.0 (the default, "full jitter") uniformly from 0 to the cap, which keeps writers
    that failed together from colliding again in lockstep; with 0.0 exactly the cap.
    Each retry logs a WARNING on the ``agentledger.retry`` logger, and so does a
    retryable failure raised because the attempts ran out.

    Args:
        attempts: how many times the work runs at most, the first included (1: never
            run again). Default 4, the first try and 3 retries.
        base_delay: seconds: the cap of the first wait, doubled for each later one.
        max_delay: seconds: the cap no wait exceeds.
        jitter: from 0.0 to 1.0: the share of each wait drawn at random (the wait is
            ``cap * (1 - jitter * random())``).

    Raises:
        ValidationError: (a ``ValueError``) naming the field whose value is out of
            range or of the wrong type.
    """

    attempts: int = 4
    base_delay: float = 0.01
    max_delay: float = 1.0
    jitter: float = 1.0

    def __post_init__(self) -> None:
        attempts = self.attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int):
            raise _refused("attempts", "an int", attempts)
        if not 1 <= attempts <= MAX_ATTEMPTS:
            raise _refused("attempts", f"from 1 to {MAX_ATTEMPTS}", attempts)
        _seconds("base_delay", self.base_delay)
        _seconds("max_delay", self.max_delay)
        if self.max_delay < self.base_delay:
            raise ValidationError(
                f"RetryPolicy.max_delay must be at least base_delay ({self.base_delay!r}), "
                f"got {self.max_delay!r}",
                path="max_delay",
            )
        jitter = self.jitter
        if not _is_number(jitter) or not 0.0 <= jitter <= 1.0:
            raise _refused("jitter", "a number from 0.0 to 1.0", jitter)

    @property
    def retries(self) -> int:
        """How many times the work runs again after its first attempt."""
        return self.attempts - 1

    def delay(self, failed: int) -> float:
        """Seconds to wait after failed attempt ``failed`` (0 for the first)."""
        # min() before the power could overflow: 2**failed grows past any float cap.
        cap = self.max_delay if failed >= 64 else min(self.max_delay, self.base_delay * 2**failed)
        # Drawn only after a failure: most calls succeed at once.
        return cap * (1.0 - self.jitter * random.random()) if self.jitter else cap


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _seconds(field: str, value: object) -> None:
    if not _is_number(value) or not 0 <= value <= MAX_DELAY_LIMIT_S:  # type: ignore[operator]
        raise _refused(field, f"a number of seconds from 0 to {MAX_DELAY_LIMIT_S:g}", value)


def _refused(field: str, wanted: str, value: object) -> ValidationError:
    return ValidationError(f"RetryPolicy.{field} must be {wanted}, got {value!r}", path=field)


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


LOST_CONNECTION_RETRIES = 1
"""How many times the ledger runs one call again after its connection was lost before
the COMMIT, whatever the retry budget: once, on a fresh connection (a disconnect
empties the pool, so a connection the server dropped while it sat in the pool is not
handed out again). Lost again, the database is unreachable, and the caller hears so
at once: behind a balancer that is its cue to move to another node. (With a Galera
node's budget of 30 attempts, writers on a killed node waited about 14 s for the
error, as long as the node took to come back.) ``ledger.run`` still retries a lost
unit of work on its whole budget: that retry is the caller's choice."""


def is_lost_before_commit(error: BaseException, commit_sent: bool) -> bool:
    """A connection lost (or a server gone) before the transaction's COMMIT was sent:
    the server rolled the transaction back, so running it again is safe. After the
    COMMIT was sent the outcome is unknown, and that retry is the caller's call."""
    return isinstance(error, DatabaseUnavailableError) and not commit_sent


def retrying(
    fn: Callable[[], R],
    *,
    policy: RetryPolicy | Callable[[], RetryPolicy],
    retry_on: Callable[[BaseException], bool],
    sleep: Callable[[float], None],
    what: str = "a call",
) -> R:
    """Call ``fn``; after an error ``retry_on`` accepts, wait (``sleep``: the caller's
    way of waiting, blocking or awaited) as ``policy`` says and call it again, up to
    ``policy.attempts`` calls in all. ``what`` names the call in the warnings: one per
    retry, and one when a retryable error is raised because the attempts ran out.

    ``policy`` may be a callable, asked after each failure: a ledger's default policy
    is its database's, known only once the first attempt has probed the database."""
    failed = 0
    while True:
        try:
            return fn()
        except Exception as error:
            if not retry_on(error):
                raise
            if callable(policy):
                policy = policy()
            if failed >= policy.retries:
                if policy.retries:
                    logger.warning(
                        "gave up on %s after %d attempts: %s: %s",
                        what,
                        policy.attempts,
                        type(error).__name__,
                        error,
                    )
                raise
            delay = policy.delay(failed)
            logger.warning(
                "retrying %s (attempt %d of %d) in %.3f s after %s: %s",
                what,
                failed + 2,
                policy.attempts,
                delay,
                type(error).__name__,
                error,
            )
        sleep(delay)
        failed += 1


def checked_policy(policy: object, *, path: str = "retry") -> RetryPolicy | None:
    """``policy`` if it is a RetryPolicy or None; else a ValidationError naming ``path``."""
    if policy is None or isinstance(policy, RetryPolicy):
        return policy
    raise ValidationError(
        f"{path} must be an agentledger.RetryPolicy, got {type(policy).__name__}", path=path
    )


def policy_of_run(
    base: Callable[[], RetryPolicy], *, retries: object, retry: object
) -> Callable[[], RetryPolicy]:
    """The policy of one ``ledger.run``: its ``retry``, else the ledger's policy
    (``base()``, asked when needed: a ledger's default is known once its database is
    probed) with ``retries`` retries when given (the older spelling of
    ``attempts - 1``). The arguments are checked at once."""
    chosen = checked_policy(retry)
    if retries is None:
        return (lambda: chosen) if chosen is not None else base
    if chosen is not None:
        raise ValidationError("give retries or retry, not both", path="retries")
    count = bounded_int(retries, "retries", high=MAX_ATTEMPTS - 1)
    return lambda: dataclasses.replace(base(), attempts=count + 1)
