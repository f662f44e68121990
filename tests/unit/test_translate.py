"""Driver errors become AgentLedgerErrors by code, never by message text."""

from __future__ import annotations

import sqlite3
from types import SimpleNamespace
from typing import Any

import asyncpg
import psycopg
import pytest
from pymysql.err import OperationalError as MySQLError
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url
from sqlalchemy.orm.exc import StaleDataError

from agentledger import (
    AgentLedgerError,
    CommitUnknownError,
    ConflictError,
    DatabaseError,
    DatabaseLockedError,
    DatabaseUnavailableError,
    PermissionDeniedError,
    QueryCancelledError,
    ReadOnlyDatabaseError,
    ResourceExhaustedError,
    ValidationError,
)
from agentledger._translate import (
    is_foreign_key_violation,
    is_unique_violation,
    translate,
    translated_commit,
)

URL = make_url("postgresql://agent:hunter2@db.example/agents")


class FakePgError(Exception):
    def __init__(self, sqlstate: str, message: str = "boom") -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


def pg8000_error(sqlstate: str, routine: str | None = None) -> Exception:
    """An error as pg8000 raises it: the server's error fields in args[0], by code."""
    fields = {"S": "ERROR", "V": "ERROR", "C": sqlstate, "M": "boom"}
    return Exception(fields if routine is None else {**fields, "R": routine})


class Psycopg2Error(Exception):
    """An error as psycopg2 raises it: ``pgcode`` and the server's fields in ``diag``
    (psycopg2 fills both from libpq; they cannot be set on its own classes)."""

    def __init__(self, pgcode: str, routine: str | None = None) -> None:
        super().__init__("boom")
        self.pgcode = pgcode
        self.diag = SimpleNamespace(source_function=routine)


class _ServerFields:
    """What psycopg reads an error's fields from (a result of libpq's, in life)."""

    def __init__(self, fields: dict[Any, bytes]) -> None:
        self.fields = fields

    def error_field(self, code: Any) -> bytes | None:
        return self.fields.get(code)


def psycopg_error(cls: type[psycopg.Error], sqlstate: str, routine: str) -> psycopg.Error:
    """A psycopg error carrying the server's SQLSTATE and routine (the ``R`` field)."""
    field = psycopg.pq.DiagnosticField
    info = _ServerFields(
        {field.SQLSTATE: sqlstate.encode(), field.SOURCE_FUNCTION: routine.encode()}
    )
    return cls("boom", info=info)  # type: ignore[arg-type]


def asyncpg_error_with(sqlstate: str, routine: str) -> Exception:
    """An asyncpg error built from the server's fields, under SQLAlchemy's adapter."""
    adapted = Exception("adapted")
    adapted.__cause__ = asyncpg.exceptions.PostgresError.new(
        {"C": sqlstate, "M": "boom", "R": routine}
    )
    return adapted


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
        (wrapped(sqlite_error("SQLITE_READONLY")), ReadOnlyDatabaseError),
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


@pytest.mark.parametrize(
    "error",
    [
        wrapped(FakePgError("23503"), sa_exc.IntegrityError),
        wrapped(Exception(1452, "fk"), sa_exc.IntegrityError),
        wrapped(sqlite_error("SQLITE_CONSTRAINT_FOREIGNKEY"), sa_exc.IntegrityError),
    ],
    ids=["postgresql", "mysql", "sqlite"],
)
def test_foreign_key_violations_are_recognised_raw_and_translated(error: BaseException) -> None:
    translated = translate(error, URL)
    translated.__cause__ = error
    assert is_foreign_key_violation(error) and is_foreign_key_violation(translated)


@pytest.mark.parametrize(
    "error",
    [
        wrapped(FakePgError("23505"), sa_exc.IntegrityError),
        wrapped(Exception(1062, "dup"), sa_exc.IntegrityError),
        wrapped(sqlite_error("SQLITE_CONSTRAINT_UNIQUE"), sa_exc.IntegrityError),
    ],
    ids=["postgresql", "mysql", "sqlite"],
)
def test_duplicate_keys_are_not_taken_for_foreign_key_violations(error: BaseException) -> None:
    assert not is_foreign_key_violation(error)


def asyncpg_error(cls: type[Exception]) -> Exception:
    """An error as SQLAlchemy's asyncpg adapter raises it: asyncpg's own as the cause."""
    adapted = Exception("adapted")
    adapted.__cause__ = cls("boom")
    return adapted


def _conditions() -> list[Any]:
    """One case per condition and dialect: (driver error, class, retryable)."""
    pg = psycopg.errors
    apg = asyncpg.exceptions
    table: dict[str, tuple[type[AgentLedgerError], bool, list[Exception]]] = {
        "disk full": (
            ResourceExhaustedError,
            False,
            [
                pg.DiskFull("x"),
                asyncpg_error(apg.DiskFullError),
                MySQLError(1021, "Disk full"),
                MySQLError(1114, "table is full"),
                sqlite_error("SQLITE_FULL"),
            ],
        ),
        "out of memory": (
            ResourceExhaustedError,
            False,
            [pg.OutOfMemory("x"), MySQLError(1037, "Out of memory"), sqlite_error("SQLITE_NOMEM")],
        ),
        "statement timeout or cancelled": (
            QueryCancelledError,
            False,
            [
                pg.QueryCanceled("x"),
                asyncpg_error(apg.QueryCanceledError),
                MySQLError(1969, "max_statement_time exceeded"),
                MySQLError(3024, "max_execution_time"),
                MySQLError(1317, "Query execution was interrupted"),
                sqlite_error("SQLITE_INTERRUPT"),
            ],
        ),
        "lock timeout": (
            DatabaseLockedError,
            False,
            [
                pg.LockNotAvailable("x"),
                asyncpg_error(apg.LockNotAvailableError),
                MySQLError(1205, "Lock wait timeout"),
                sqlite_error("SQLITE_BUSY"),
            ],
        ),
        "lock refused at once": (DatabaseLockedError, True, [sqlite_error("SQLITE_BUSY_SNAPSHOT")]),
        "read-only database": (
            ReadOnlyDatabaseError,
            False,
            [
                pg.ReadOnlySqlTransaction("x"),
                asyncpg_error(apg.ReadOnlySQLTransactionError),
                pg8000_error("25006"),
                Psycopg2Error("25006"),
                psycopg_error(pg.FeatureNotSupported, "0A000", "call_bool_check_hook"),
                asyncpg_error_with("0A000", "call_bool_check_hook"),
                pg8000_error("0A000", routine="call_bool_check_hook"),
                Psycopg2Error("0A000", routine="call_bool_check_hook"),
                psycopg_error(pg.FeatureNotSupported, "0A000", "call_enum_check_hook"),
                MySQLError(1290, "--read-only"),
                MySQLError(1792, "READ ONLY transaction"),
                MySQLError(1836, "read-only mode"),
                sqlite_error("SQLITE_READONLY"),
                sqlite_error("SQLITE_READONLY_DIRECTORY"),
            ],
        ),
        "too many connections": (
            DatabaseUnavailableError,
            True,
            [
                pg.TooManyConnections("x"),
                asyncpg_error(apg.TooManyConnectionsError),
                MySQLError(1040, "Too many connections"),
                MySQLError(1203, "max_user_connections"),
            ],
        ),
        "admin shutdown": (
            DatabaseUnavailableError,
            True,
            [
                pg.AdminShutdown("x"),
                asyncpg_error(apg.AdminShutdownError),
                MySQLError(1053, "Server shutdown"),
                MySQLError(1927, "Connection was killed"),
            ],
        ),
        "connection failure": (
            DatabaseUnavailableError,
            True,
            [
                pg.ConnectionFailure("x"),
                asyncpg_error(apg.ConnectionFailureError),
                MySQLError(2013, "Lost connection"),
                MySQLError(2003, "Can't connect"),
                sqlite_error("SQLITE_IOERR_WRITE"),
            ],
        ),
        "cannot open the file": (
            DatabaseUnavailableError,
            False,
            [sqlite_error("SQLITE_CANTOPEN")],
        ),
    }
    return [
        pytest.param(error, expected, retryable, id=f"{condition}-{type(error).__name__}-{n}")
        for condition, (expected, retryable, errors) in table.items()
        for n, error in enumerate(errors)
    ]


@pytest.mark.parametrize(("orig", "expected", "retryable"), _conditions())
def test_each_condition_gets_one_class_and_retryable_on_every_dialect(
    orig: Exception, expected: type[AgentLedgerError], retryable: bool
) -> None:
    translated = translate(wrapped(orig), URL)
    assert (type(translated), translated.retryable) == (expected, retryable)


def test_disk_full_and_out_of_memory_say_which_resource_ran_out() -> None:
    disk = translate(wrapped(sqlite_error("SQLITE_FULL")), URL)
    memory = translate(wrapped(MySQLError(1037, "Out of memory")), URL)
    assert isinstance(disk, ResourceExhaustedError) and disk.resource == "disk"
    assert isinstance(memory, ResourceExhaustedError) and memory.resource == "memory"


def lost_at_commit(url: str) -> BaseException:
    """What a COMMIT raises when the connection drops before the server's reply."""
    try:
        with translated_commit(make_url(url)):
            raise wrapped(MySQLError(2013, "Lost connection"), invalidated=True)
    except AgentLedgerError as error:
        return error
    raise AssertionError("unreachable")


def test_a_server_connection_lost_at_commit_leaves_the_outcome_unknown() -> None:
    error = lost_at_commit("mysql://agent@db.example/agents")
    assert type(error) is CommitUnknownError and not error.retryable
    assert isinstance(error, DatabaseUnavailableError)


def test_a_sqlite_commit_always_knows_its_outcome() -> None:
    assert type(lost_at_commit("sqlite:///agents.db")) is DatabaseUnavailableError


def test_translated_turns_a_driver_error_into_ours_and_lets_the_rest_through() -> None:
    from agentledger._translate import translated
    from agentledger.errors import AgentLedgerError, UsageError

    with pytest.raises(AgentLedgerError) as caught, translated(URL):
        raise OSError("disk I/O error")
    assert isinstance(caught.value.__cause__, OSError)
    ours = UsageError("already ours")
    with pytest.raises(UsageError) as kept, translated(URL):
        raise ours
    assert kept.value is ours
    with pytest.raises(KeyError), translated(URL):
        raise KeyError("not a database error")
    with translated(URL):
        pass


def raised_while_handling(error: BaseException, handled: BaseException) -> BaseException:
    """``error`` as Python leaves it when raised inside ``except`` for ``handled``."""
    error.__context__ = handled
    return error


def test_a_savepoint_gone_after_a_deadlock_is_the_deadlock() -> None:
    deadlock = wrapped(MySQLError(1213, "Deadlock found"))
    gone = raised_while_handling(wrapped(MySQLError(1305, "SAVEPOINT does not exist")), deadlock)
    translated = translate(gone, URL)
    assert isinstance(translated, ConflictError)
    assert (translated.reason, translated.retryable) == ("serialization", True)


def test_a_pending_rollback_caused_by_a_deadlock_is_the_deadlock() -> None:
    pending = sa_exc.PendingRollbackError(
        "Can't reconnect until invalid transaction is rolled back"
    )
    pending.__cause__ = wrapped(MySQLError(1213, "Deadlock found"))
    translated = translate(pending, URL)
    assert isinstance(translated, ConflictError)
    assert translated.reason == "serialization"


def test_a_savepoint_gone_for_no_known_reason_stays_a_database_error() -> None:
    translated = translate(wrapped(MySQLError(1305, "SAVEPOINT does not exist")), URL)
    assert type(translated) is DatabaseError
    assert not translated.retryable


@pytest.mark.parametrize(
    "orig",
    [
        psycopg_error(psycopg.errors.FeatureNotSupported, "0A000", "RevalidateCachedQuery"),
        pg8000_error("0A000", routine="transformLockingClause"),
        Psycopg2Error("0A000"),
        asyncpg_error_with("0A000", "RevalidateCachedQuery"),
    ],
    ids=["psycopg-cached-plan", "pg8000-locking-clause", "psycopg2-no-routine", "asyncpg"],
)
def test_feature_not_supported_from_anything_but_a_setting_is_not_a_read_only_server(
    orig: Exception,
) -> None:
    translated = translate(wrapped(orig), URL)
    assert type(translated) is DatabaseError


def test_a_read_only_refusal_is_still_a_permission_denied_error() -> None:
    translated = translate(wrapped(psycopg.errors.ReadOnlySqlTransaction("x")), URL)
    assert isinstance(translated, PermissionDeniedError)
    assert not translated.retryable
