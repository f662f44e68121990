"""Which failures are retried, and how often."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

from agentledger import (
    ConflictError,
    DatabaseLockedError,
    DatabaseUnavailableError,
    ValidationError,
)
from agentledger._retry import (
    backoff_delays,
    is_lost_before_commit,
    is_transient,
    retrying,
    should_retry,
)

T = TypeVar("T")


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (ConflictError("deadlock", reason="serialization"), True),
        (DatabaseLockedError("busy"), True),
        (ConflictError("stale", reason="stale"), False),
        (ConflictError("exists", reason="exists"), False),
        (DatabaseUnavailableError("lost"), False),
        (ValidationError("bad"), False),
    ],
)
def test_only_failures_that_say_nothing_about_the_data_are_transient(
    error: Exception, transient: bool
) -> None:
    assert is_transient(error) is transient


def test_a_connection_lost_before_commit_is_safe_to_run_again() -> None:
    assert is_lost_before_commit(DatabaseUnavailableError("lost"), commit_sent=False)


def test_a_connection_lost_after_commit_was_sent_is_not_run_again() -> None:
    assert not is_lost_before_commit(DatabaseUnavailableError("lost"), commit_sent=True)
    assert not is_lost_before_commit(DatabaseLockedError("busy"), commit_sent=False)


def test_run_retries_every_conflict_and_every_retryable_error() -> None:
    assert should_retry(ConflictError("x", reason="exists"))
    assert should_retry(DatabaseUnavailableError("lost"))
    assert not should_retry(ValidationError("bad"))
    assert not should_retry(RuntimeError("yours"))


def test_backoff_gives_one_delay_per_retry_then_none() -> None:
    delays = list(backoff_delays(3))
    assert len(delays) == 4 and delays[-1] is None
    assert all(0 <= d <= 1.0 for d in delays[:-1])
    with pytest.raises(ValidationError):
        list(backoff_delays(-1))


def transient(fn: Callable[[], T], retries: int = 3, slept: list[float] | None = None) -> T:
    """``fn`` under the transaction runner's policy, recording the waits."""
    waits = [] if slept is None else slept
    return retrying(fn, retries=retries, retry_on=is_transient, sleep=waits.append)


def test_a_transient_failure_is_retried_until_it_succeeds() -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConflictError("deadlock", reason="serialization")
        return "done"

    assert transient(flaky) == "done"
    assert len(calls) == 3


def test_the_caller_decides_how_to_wait_between_tries() -> None:
    slept: list[float] = []

    def flaky() -> str:
        if len(slept) < 2:
            raise DatabaseLockedError("busy")
        return "done"

    assert transient(flaky, slept=slept) == "done"
    assert len(slept) == 2 and all(0 <= delay <= 1.0 for delay in slept)


def test_a_lasting_transient_failure_surfaces_after_the_retries() -> None:
    calls = []

    def stuck() -> None:
        calls.append(1)
        raise DatabaseLockedError("busy")

    with pytest.raises(DatabaseLockedError):
        transient(stuck, retries=2)
    assert len(calls) == 3


def test_a_stale_conflict_is_not_retried_by_the_transaction_runner() -> None:
    calls = []

    def stale() -> None:
        calls.append(1)
        raise ConflictError("stale", reason="stale")

    with pytest.raises(ConflictError):
        transient(stale)
    assert len(calls) == 1
