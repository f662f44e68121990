"""Which failures are retried, and how often."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

from agentledger import (
    AsyncLedger,
    CommitUnknownError,
    ConflictError,
    DatabaseLockedError,
    DatabaseUnavailableError,
    Ledger,
    RetryPolicy,
    UnitOfWork,
    ValidationError,
)
from agentledger._retry import (
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


def test_default_backoff_delays_stay_under_a_cap_that_doubles_up_to_a_second() -> None:
    policy = RetryPolicy()
    assert all(0 <= policy.delay(0) <= 0.01 for _ in range(100))
    assert all(0 <= policy.delay(3) <= 0.08 for _ in range(100))
    assert all(0 <= policy.delay(12) <= 1.0 for _ in range(100))
    assert policy.delay(10_000) <= 1.0


def test_full_jitter_spreads_the_waits_of_writers_that_failed_together() -> None:
    waits = {RetryPolicy().delay(4) for _ in range(50)}
    assert len(waits) > 40


def test_without_jitter_each_wait_is_its_cap() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=3.0, jitter=0.0)
    assert [policy.delay(failed) for failed in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_partial_jitter_keeps_each_wait_within_its_share_of_the_cap() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=1.0, jitter=0.25)
    assert all(0.75 <= policy.delay(0) <= 1.0 for _ in range(100))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("attempts", 0),
        ("attempts", -1),
        ("attempts", 1.5),
        ("attempts", True),
        ("attempts", "3"),
        ("attempts", 1001),
        ("base_delay", -0.1),
        ("base_delay", float("nan")),
        ("base_delay", None),
        ("max_delay", float("inf")),
        ("max_delay", 3601),
        ("jitter", 1.5),
        ("jitter", -0.1),
        ("jitter", False),
    ],
)
def test_a_policy_out_of_range_is_refused_naming_its_field(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=rf"RetryPolicy\.{field} must be") as refused:
        RetryPolicy(**{field: value})  # type: ignore[arg-type]
    assert isinstance(refused.value, ValidationError)
    assert refused.value.path == field


def test_a_max_delay_below_the_base_delay_is_refused() -> None:
    with pytest.raises(ValidationError, match="max_delay must be at least base_delay") as refused:
        RetryPolicy(base_delay=2.0, max_delay=1.0)
    assert refused.value.path == "max_delay"


def test_a_policy_is_frozen() -> None:
    policy = RetryPolicy()
    with pytest.raises(AttributeError):
        policy.attempts = 9  # type: ignore[misc]


@pytest.mark.parametrize("ledger_class", [Ledger, AsyncLedger])
def test_a_ledger_refuses_a_retry_option_that_is_not_a_policy(ledger_class: type) -> None:
    with pytest.raises(ValidationError, match=r"retry must be an agentledger\.RetryPolicy"):
        ledger_class("sqlite://", retry=3)


def test_run_refuses_retries_and_retry_together() -> None:
    with Ledger.in_memory() as ledger, pytest.raises(ValidationError, match="not both"):
        ledger.run(lambda uow: None, retries=2, retry=RetryPolicy())


def test_a_negative_retry_count_is_refused_before_the_first_call() -> None:
    calls: list[int] = []
    with Ledger.in_memory() as ledger, pytest.raises(ValidationError):
        ledger.run(lambda uow: calls.append(1), retries=-1)
    assert calls == []


def transient(fn: Callable[[], T], retries: int = 3, slept: list[float] | None = None) -> T:
    """``fn`` under a policy of ``retries`` retries, recording the waits."""
    waits = [] if slept is None else slept
    policy = RetryPolicy(attempts=retries + 1)
    return retrying(fn, policy=policy, retry_on=is_transient, sleep=waits.append)


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
            retrying(
                flaky,
                policy=RetryPolicy(),
                retry_on=is_transient,
                sleep=lambda _: None,
                what="x.y",
            )
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
        retrying(refused, policy=RetryPolicy(), retry_on=is_transient, sleep=lambda _: None)
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


def test_a_retryable_failure_that_outlasts_the_attempts_logs_that_it_gave_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def stuck() -> None:
        raise ConflictError("deadlock", reason="serialization")

    with caplog.at_level("WARNING", logger="agentledger"), pytest.raises(ConflictError):
        retrying(
            stuck,
            policy=RetryPolicy(attempts=3, base_delay=0.0, max_delay=0.0),
            retry_on=is_transient,
            sleep=lambda _: None,
            what="x.y",
        )
    last = [r for r in caplog.records if r.name == "agentledger.retry"][-1]
    assert last.levelname == "WARNING"
    assert last.getMessage() == "gave up on x.y after 3 attempts: ConflictError: deadlock"


def test_a_policy_of_one_attempt_runs_once_and_warns_of_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[int] = []

    def stuck() -> None:
        calls.append(1)
        raise ConflictError("deadlock", reason="serialization")

    with caplog.at_level("DEBUG", logger="agentledger"), pytest.raises(ConflictError):
        retrying(stuck, policy=RetryPolicy(attempts=1), retry_on=is_transient, sleep=print)
    assert calls == [1]
    assert caplog.records == []
