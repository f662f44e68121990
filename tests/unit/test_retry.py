"""Which failures are retried, and how often."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

from agentledger import (
    CommitUnknownError,
    ConflictError,
    DatabaseLockedError,
    DatabaseUnavailableError,
    Ledger,
    UnitOfWork,
    ValidationError,
)
from agentledger._retry import (
    backoff_delay,
    is_lost_before_commit,
    is_transient,
    retrying,
    should_retry,
    transient_or_replayable,
)

T = TypeVar("T")


def refused_at_once() -> DatabaseLockedError:
    """A lock refused without a wait (SQLite's busy snapshot): worth another try."""
    error = DatabaseLockedError("busy snapshot")
    error.retryable = True
    return error


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (ConflictError("deadlock", reason="serialization"), True),
        (refused_at_once(), True),
        (DatabaseLockedError("lock wait ran out"), False),
        (CommitUnknownError("lost at commit"), False),
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


def test_run_retries_every_retryable_error() -> None:
    assert should_retry(ConflictError("x", reason="stale"))
    assert should_retry(ConflictError("x", reason="serialization"))
    assert should_retry(DatabaseUnavailableError("lost"))
    assert should_retry(refused_at_once())


@pytest.mark.parametrize(
    "error",
    [
        ConflictError("x", reason="exists"),
        ConflictError("x", reason="duplicate"),
        ConflictError("x", reason="deleted"),
        ConflictError("x", reason="parent"),
        DatabaseLockedError("lock wait ran out"),
        CommitUnknownError("lost at commit"),
        ValidationError("bad"),
        RuntimeError("yours"),
    ],
    ids=repr,
)
def test_run_raises_at_once_what_a_retry_cannot_fix(error: Exception) -> None:
    assert not should_retry(error)


def test_the_ledger_replays_an_unknown_commit_only_when_the_call_said_it_is_safe() -> None:
    assert transient_or_replayable(lambda: True)(CommitUnknownError("lost at commit"))
    assert not transient_or_replayable(lambda: False)(CommitUnknownError("lost at commit"))
    assert not transient_or_replayable(lambda: True)(DatabaseUnavailableError("lost"))


def test_backoff_delays_stay_under_a_cap_that_doubles_up_to_a_second() -> None:
    assert all(0 <= backoff_delay(0) <= 0.01 for _ in range(100))
    assert all(0 <= backoff_delay(3) <= 0.08 for _ in range(100))
    assert all(0 <= backoff_delay(12) <= 1.0 for _ in range(100))


def test_a_negative_retry_count_is_refused_before_the_first_call() -> None:
    calls: list[int] = []
    with pytest.raises(ValidationError):
        retrying(lambda: calls.append(1), retries=-1, retry_on=is_transient, sleep=print)
    assert calls == []


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
            raise refused_at_once()
        return "done"

    assert transient(flaky, slept=slept) == "done"
    assert len(slept) == 2 and all(0 <= delay <= 1.0 for delay in slept)


def test_a_lasting_transient_failure_surfaces_after_the_retries() -> None:
    calls = []

    def stuck() -> None:
        calls.append(1)
        raise refused_at_once()

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


def test_a_lock_wait_that_ran_out_is_not_waited_again() -> None:
    calls = []

    def waited_out() -> None:
        calls.append(1)
        raise DatabaseLockedError("lock wait ran out")

    with pytest.raises(DatabaseLockedError):
        transient(waited_out)
    assert len(calls) == 1


def test_each_retry_logs_a_warning_saying_what_which_attempt_and_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failures = [refused_at_once(), refused_at_once()]

    def flaky() -> str:
        if failures:
            raise failures.pop(0)
        return "done"

    with caplog.at_level("WARNING", logger="agentledger"):
        assert (
            retrying(flaky, retries=3, retry_on=is_transient, sleep=lambda _: None, what="x.y")
            == "done"
        )
    lines = [r.getMessage() for r in caplog.records if r.name == "agentledger.retry"]
    assert [line.split(" in ")[0] for line in lines] == [
        "retrying x.y (attempt 2 of 4)",
        "retrying x.y (attempt 3 of 4)",
    ]
    assert all("after DatabaseLockedError" in line for line in lines)


def test_a_call_that_is_not_retried_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    def refused() -> None:
        raise ValidationError("bad", path="x")

    with caplog.at_level("DEBUG", logger="agentledger"), pytest.raises(ValidationError):
        retrying(refused, retries=3, retry_on=is_transient, sleep=lambda _: None)
    assert caplog.records == []


def test_a_retried_unit_of_work_is_named_in_the_warning(caplog: pytest.LogCaptureFixture) -> None:
    tries: list[int] = []

    def turn(uow: UnitOfWork) -> int:
        tries.append(1)
        if len(tries) == 1:
            raise ConflictError("someone else wrote first", reason="stale")
        return len(tries)

    with Ledger.in_memory() as ledger, caplog.at_level("WARNING", logger="agentledger"):
        assert ledger.run(turn) == 2
    (line,) = [r.getMessage() for r in caplog.records if r.name == "agentledger.retry"]
    assert line.startswith(
        "retrying ledger.run(test_a_retried_unit_of_work_is_named_in_the_warning"
    )
    assert "after ConflictError: someone else wrote first" in line
