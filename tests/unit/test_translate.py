"""Driver errors become AgentLedgerErrors by code, never by message text."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url
from sqlalchemy.orm.exc import StaleDataError

from agentledger import (
    ConflictError,
    DatabaseError,
    DatabaseLockedError,
    DatabaseUnavailableError,
    PermissionDeniedError,
    ValidationError,
)
from agentledger._translate import is_unique_violation, translate

URL = make_url("postgresql://agent:hunter2@db.example/agents")


class FakePgError(Exception):
    def __init__(self, sqlstate: str, message: str = "boom") -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


def pg8000_error(sqlstate: str) -> Exception:
    """An error as pg8000 raises it: the server's error fields in args[0], by code."""
    return Exception({"S": "ERROR", "V": "ERROR", "C": sqlstate, "M": "boom"})


def wrapped(
    orig: Exception,
    cls: type[sa_exc.DBAPIError] = sa_exc.OperationalError,
    invalidated: bool = False,
) -> sa_exc.DBAPIError:
    return cls("SELECT 1", {}, orig, connection_invalidated=invalidated)


def sqlite_error(name: str) -> sqlite3.Error:
    error = sqlite3.OperationalError("message text is never read")
    error.sqlite_errorname = name  # type: ignore[attr-defined]
    return error


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (wrapped(FakePgError("40001")), ConflictError),
        (wrapped(FakePgError("40P01"), sa_exc.DBAPIError), ConflictError),
        (wrapped(FakePgError("55P03")), DatabaseLockedError),
        (wrapped(FakePgError("42501"), sa_exc.ProgrammingError), PermissionDeniedError),
        (wrapped(FakePgError("57P01")), DatabaseUnavailableError),
        (wrapped(FakePgError("08006")), DatabaseUnavailableError),
        (wrapped(FakePgError("22P02"), sa_exc.DataError), DatabaseError),
        (wrapped(pg8000_error("40001")), ConflictError),
        (wrapped(pg8000_error("55P03")), DatabaseLockedError),
        (wrapped(pg8000_error("57P01")), DatabaseUnavailableError),
        (wrapped(Exception(1213, "Deadlock")), ConflictError),
        (wrapped(Exception(1205, "Lock wait")), DatabaseLockedError),
        (wrapped(Exception(1142, "denied")), PermissionDeniedError),
        (wrapped(Exception(2013, "lost")), DatabaseUnavailableError),
        (wrapped(sqlite_error("SQLITE_BUSY")), DatabaseLockedError),
        (wrapped(sqlite_error("SQLITE_READONLY")), PermissionDeniedError),
        (wrapped(sqlite_error("SQLITE_CANTOPEN")), DatabaseUnavailableError),
        (wrapped(Exception("anything"), invalidated=True), DatabaseUnavailableError),
        (StaleDataError("0 rows matched"), ConflictError),
        (ConnectionRefusedError(111, "refused"), DatabaseUnavailableError),
    ],
    ids=lambda value: type(value).__name__ if not isinstance(value, type) else value.__name__,
)
def test_errors_are_classified_by_code(error: BaseException, expected: type) -> None:
    translated = translate(error, URL)
    assert type(translated) is expected


def test_a_serialization_failure_is_a_retryable_conflict() -> None:
    translated = translate(wrapped(FakePgError("40001")), URL)
    assert isinstance(translated, ConflictError)
    assert translated.reason == "serialization"
    assert translated.retryable


def test_messages_carry_the_masked_url_never_the_password() -> None:
    translated = translate(wrapped(FakePgError("08006", "password hunter2 rejected")), URL)
    assert "hunter2" not in str(translated)
    assert "***" in str(translated)


def test_our_own_error_inside_a_statement_error_comes_out_unwrapped() -> None:
    ours = ValidationError("naive datetime")
    assert translate(sa_exc.StatementError("x", "SELECT", {}, ours), URL) is ours


@pytest.mark.parametrize(
    "error",
    [
        wrapped(FakePgError("23505"), sa_exc.IntegrityError),
        wrapped(pg8000_error("23505"), sa_exc.IntegrityError),
        wrapped(Exception(1062, "Duplicate"), sa_exc.IntegrityError),
        wrapped(sqlite_error("SQLITE_CONSTRAINT_PRIMARYKEY"), sa_exc.IntegrityError),
        wrapped(sqlite_error("SQLITE_CONSTRAINT_UNIQUE"), sa_exc.IntegrityError),
    ],
)
def test_unique_violations_are_recognised_on_every_dialect(error: BaseException) -> None:
    assert is_unique_violation(error)


@pytest.mark.parametrize(
    "error",
    [
        wrapped(FakePgError("23503"), sa_exc.IntegrityError),
        wrapped(Exception(1452, "fk"), sa_exc.IntegrityError),
        wrapped(sqlite_error("SQLITE_CONSTRAINT_FOREIGNKEY"), sa_exc.IntegrityError),
    ],
)
def test_foreign_key_violations_are_not_taken_for_duplicates(error: BaseException) -> None:
    assert not is_unique_violation(error)
