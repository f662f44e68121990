"""Oracle, SQL Server and CockroachDB errors become AgentLedgerErrors by code.

No server and no driver is needed: each driver's exceptions are built in its own shape
(the shapes are those of python-oracledb 2.x/3.x, pymssql 2.x, pyodbc 5.x) and wrapped
as SQLAlchemy wraps them. Where a driver is installed, one test reads its own classes.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import asyncpg
import psycopg
import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

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
)
from agentledger._translate import is_unique_violation, translate, translated_commit

URL = make_url("oracle+oracledb://agent:hunter2@db.example/?service_name=agents")
COCKROACH = make_url("cockroachdb://agent:hunter2@db.example:26257/agents")


class FakeDriver:
    """A DBAPI module's exception classes, named as the driver names them and living in
    its package (the package is what tells pymssql's numbers from MySQL's)."""

    def __init__(self, package: str) -> None:
        self.Error = type("Error", (Exception,), {"__module__": package})
        for name in ("DatabaseError", "OperationalError", "IntegrityError", "ProgrammingError"):
            setattr(self, name, type(name, (self.Error,), {"__module__": package}))

    def raised(self, kind: str, *args: Any) -> sa_exc.DBAPIError:
        """The driver's ``kind`` error with ``args``, as SQLAlchemy re-raises it."""
        return sa_exc.DBAPIError.instance("SELECT 1", {}, getattr(self, kind)(*args), self.Error)


ORACLEDB = FakeDriver("oracledb.exceptions")
PYMSSQL = FakeDriver("pymssql.exceptions")
PYODBC = FakeDriver("pyodbc")


def oracle(full_code: str, code: int | None = None, kind: str = "DatabaseError") -> Exception:
    """A python-oracledb error: ``args[0]`` is its ``_Error`` object. ``code`` is the ORA
    number (0 for the driver's own DPY errors); ``full_code`` is ``ORA-nnnnn``, or the
    DPY code python-oracledb renames some ORA errors to (ORA-03113 is DPY-4011)."""
    if code is None:
        code = int(full_code[4:]) if full_code.startswith("ORA-") else 0
    info = SimpleNamespace(
        code=code, full_code=full_code, message=f"{full_code}: boom", isrecoverable=False
    )
    return ORACLEDB.raised(kind, info)


def pymssql(number: int, kind: str = "OperationalError") -> Exception:
    """A pymssql error raised while running a statement: ``args == (number, message)``."""
    return PYMSSQL.raised(kind, number, b"message text is never read")


def pymssql_connecting(number: int) -> Exception:
    """A pymssql error raised while connecting: ``args == ((number, message),)``."""
    return PYMSSQL.raised("OperationalError", (number, b"message text is never read"))


def pyodbc(sqlstate: str, native: int = 0, kind: str = "OperationalError") -> Exception:
    """A pyodbc error: ``args == (sqlstate, message)``; SQL Server's own number is only
    in the message text."""
    return PYODBC.raised(kind, sqlstate, f"[{sqlstate}] [Microsoft][ODBC Driver 18] ({native})")


def cockroach(error: Exception) -> Exception:
    """A CockroachDB error as SQLAlchemy raises it from a PostgreSQL driver (psycopg)."""
    return sa_exc.DBAPIError.instance("SELECT 1", {}, error, psycopg.Error)


class Psycopg2Error(Exception):
    """An error as psycopg2 raises it (sqlalchemy-cockroachdb's default driver)."""

    def __init__(self, pgcode: str) -> None:
        super().__init__("boom")
        self.pgcode = pgcode


def under_asyncpg(cls: type[Exception]) -> Exception:
    """An error as SQLAlchemy's asyncpg adapter raises it: asyncpg's own as the cause."""
    adapted = Exception("adapted")
    adapted.__cause__ = cls("boom")
    return sa_exc.OperationalError("SELECT 1", {}, adapted)


def _cases() -> list[Any]:
    """One case per code: (error, class, retryable)."""
    table: dict[type[AgentLedgerError], tuple[bool, list[tuple[str, Exception]]]] = {
        ConflictError: (
            True,
            [
                ("ORA-08177", oracle("ORA-08177")),
                ("ORA-00060", oracle("ORA-00060")),
                ("mssql-1205", pymssql(1205)),
                ("mssql-3960", pymssql(3960)),
                ("odbc-40001", pyodbc("40001", 1205)),
                ("crdb-40001", cockroach(psycopg.errors.SerializationFailure("restart"))),
                ("crdb-40001-psycopg2", cockroach(Psycopg2Error("40001"))),
                ("crdb-40001-asyncpg", under_asyncpg(asyncpg.exceptions.SerializationError)),
            ],
        ),
        CommitUnknownError: (
            False,
            [
                ("crdb-40003", cockroach(psycopg.errors.StatementCompletionUnknown("x"))),
                ("crdb-40003-psycopg2", cockroach(Psycopg2Error("40003"))),
                (
                    "crdb-40003-asyncpg",
                    under_asyncpg(asyncpg.exceptions.StatementCompletionUnknownError),
                ),
                ("odbc-40003", pyodbc("40003")),
            ],
        ),
        DatabaseLockedError: (
            False,
            [
                ("ORA-00054", oracle("ORA-00054")),
                ("ORA-30006", oracle("ORA-30006")),
                ("ORA-04021", oracle("ORA-04021")),
                ("mssql-1222", pymssql(1222)),
            ],
        ),
        QueryCancelledError: (
            False,
            [
                ("ORA-01013", oracle("ORA-01013", kind="OperationalError")),
                ("DPY-4024", oracle("DPY-4024")),
                ("odbc-HYT00", pyodbc("HYT00")),
                ("odbc-HY008", pyodbc("HY008")),
            ],
        ),
        PermissionDeniedError: (
            False,
            [
                ("ORA-01031", oracle("ORA-01031")),
                ("ORA-01017", oracle("ORA-01017")),
                ("ORA-01045", oracle("ORA-01045")),
                *[(f"mssql-{n}", pymssql(n)) for n in (229, 230, 262, 916, 18456)],
                ("mssql-18456-connecting", pymssql_connecting(18456)),
                ("odbc-28000", pyodbc("28000", 18456)),
            ],
        ),
        ReadOnlyDatabaseError: (
            False,
            [("ORA-16000", oracle("ORA-16000")), ("mssql-3906", pymssql(3906))],
        ),
        ResourceExhaustedError: (
            False,
            [
                *[(code, oracle(code)) for code in ("ORA-01653", "ORA-01654", "ORA-01688")],
                *[(code, oracle(code)) for code in ("ORA-01536", "ORA-04030", "ORA-04031")],
                *[(f"mssql-{n}", pymssql(n)) for n in (1105, 9002, 701)],
            ],
        ),
        DatabaseUnavailableError: (
            True,
            [
                ("ORA-03113", oracle("DPY-4011", code=3113, kind="OperationalError")),
                ("ORA-03114", oracle("DPY-4011", code=3114, kind="OperationalError")),
                ("ORA-03135", oracle("DPY-4011", code=3135, kind="OperationalError")),
                *[(code, oracle(code)) for code in ("ORA-12541", "ORA-12514", "ORA-12170")],
                ("DPY-4011", oracle("DPY-4011")),
                ("DPY-6005", oracle("DPY-6005", kind="OperationalError")),
                *[(f"mssql-{n}", pymssql(n)) for n in (10054, 10053, 233, 20047, 20003)],
                ("mssql-40613", pymssql(40613)),
                ("mssql-20009-connecting", pymssql_connecting(20009)),
                *[(f"odbc-{s}", pyodbc(s)) for s in ("08S01", "08001")],
            ],
        ),
    }
    return [
        pytest.param(error, expected, retryable, id=f"{expected.__name__}-{name}")
        for expected, (retryable, errors) in table.items()
        for name, error in errors
    ]


@pytest.mark.parametrize(("error", "expected", "retryable"), _cases())
def test_each_code_gets_the_class_its_condition_has_on_every_dialect(
    error: Exception, expected: type[AgentLedgerError], retryable: bool
) -> None:
    translated = translate(error, URL)
    assert (type(translated), translated.retryable) == (expected, retryable)


@pytest.mark.parametrize(
    "error",
    [
        oracle("ORA-08177"),
        oracle("ORA-00060"),
        pymssql(1205),
        pymssql(3960),
        pyodbc("40001"),
        cockroach(psycopg.errors.SerializationFailure("restart transaction")),
    ],
    ids=["ORA-08177", "ORA-00060", "mssql-1205", "mssql-3960", "odbc-40001", "crdb-40001"],
)
def test_serialization_failures_and_deadlocks_are_serialization_conflicts(
    error: Exception,
) -> None:
    translated = translate(error, URL)
    assert isinstance(translated, ConflictError)
    assert translated.reason == "serialization"


def test_sql_server_1205_is_a_deadlock_where_mysql_1205_is_a_lock_wait_timeout() -> None:
    mysql = sa_exc.OperationalError("SELECT 1", {}, Exception(1205, "Lock wait timeout"))
    assert type(translate(pymssql(1205), URL)) is ConflictError
    assert type(translate(mysql, URL)) is DatabaseLockedError


@pytest.mark.parametrize(
    ("error", "resource"),
    [
        (oracle("ORA-01653"), "disk"),
        (oracle("ORA-01536"), "disk"),
        (oracle("ORA-04030"), "memory"),
        (oracle("ORA-04031"), "memory"),
        (pymssql(1105), "disk"),
        (pymssql(9002), "disk"),
        (pymssql(701), "memory"),
    ],
    ids=["ORA-01653", "ORA-01536", "ORA-04030", "ORA-04031", "mssql-1105", "mssql-9002", "701"],
)
def test_resource_exhaustion_says_which_resource_ran_out(error: Exception, resource: str) -> None:
    translated = translate(error, URL)
    assert isinstance(translated, ResourceExhaustedError)
    assert translated.resource == resource


@pytest.mark.parametrize(
    "error",
    [
        oracle("ORA-00001", kind="IntegrityError"),
        pymssql(2627, kind="IntegrityError"),
        pymssql(2601, kind="IntegrityError"),
        cockroach(psycopg.errors.UniqueViolation("duplicate key value")),
        cockroach(Psycopg2Error("23505")),
    ],
    ids=["ORA-00001", "mssql-2627", "mssql-2601", "crdb-23505", "crdb-23505-psycopg2"],
)
def test_duplicate_keys_are_recognised_on_oracle_sql_server_and_cockroachdb(
    error: Exception,
) -> None:
    assert is_unique_violation(error)


@pytest.mark.parametrize(
    "error",
    [
        oracle("ORA-02291", kind="IntegrityError"),
        pymssql(547, kind="IntegrityError"),
        cockroach(psycopg.errors.ForeignKeyViolation("fk")),
    ],
    ids=["ORA-02291", "mssql-547", "crdb-23503"],
)
def test_foreign_key_violations_are_not_taken_for_duplicate_keys(error: Exception) -> None:
    assert not is_unique_violation(error)


def test_pyodbc_23000_is_no_duplicate_key_since_only_its_message_names_the_number() -> None:
    error = pyodbc("23000", native=2627, kind="IntegrityError")
    assert not is_unique_violation(error)
    assert type(translate(error, URL)) is DatabaseError


@pytest.mark.parametrize(
    "error",
    [
        oracle("ORA-00942", kind="OperationalError"),
        oracle("DPY-2001", kind="OperationalError"),
        pymssql(50000),
        pymssql_connecting(50000),
        pyodbc("42S02"),
        pyodbc("HY000"),
        cockroach(psycopg.errors.UndefinedTable("no table")),
    ],
    ids=[
        "ORA-00942",
        "DPY-2001",
        "mssql-50000",
        "mssql-50000-connecting",
        "odbc-42S02",
        "odbc-HY000",
        "crdb-42P01",
    ],
)
def test_an_unknown_code_of_each_dialect_stays_a_generic_database_error(error: Exception) -> None:
    translated = translate(error, URL)
    assert type(translated) is DatabaseError
    assert not translated.retryable


def test_a_commit_cockroachdb_cannot_vouch_for_leaves_the_outcome_unknown() -> None:
    with pytest.raises(CommitUnknownError) as caught, translated_commit(COCKROACH):
        raise cockroach(psycopg.errors.StatementCompletionUnknown("result is ambiguous"))
    assert not caught.value.retryable


def test_a_connection_lost_at_commit_on_cockroachdb_leaves_the_outcome_unknown() -> None:
    lost = sa_exc.DBAPIError.instance(
        "COMMIT", {}, psycopg.errors.ConnectionFailure("x"), psycopg.Error
    )
    with pytest.raises(CommitUnknownError), translated_commit(COCKROACH):
        raise lost


def test_messages_carry_the_masked_url_never_the_password() -> None:
    translated = translate(oracle("ORA-01017"), URL)
    assert "hunter2" not in str(translated)
    assert "***" in str(translated)


def test_the_installed_drivers_own_classes_are_read_by_their_codes() -> None:
    """Where python-oracledb and pymssql are installed, their real classes and error
    objects (not the fakes above) classify the same."""
    oracledb = pytest.importorskip("oracledb")
    pymssql_module = pytest.importorskip("pymssql")
    errors = pytest.importorskip("oracledb.errors")
    lost = oracledb.OperationalError(errors._Error("ORA-03113: end-of-file", code=3113))
    duplicate = oracledb.IntegrityError(errors._Error("ORA-00001: unique constraint", code=1))
    victim = pymssql_module.OperationalError(1205, b"chosen as the deadlock victim")

    def wrap(orig: Exception, base: type[Exception]) -> sa_exc.DBAPIError:
        return sa_exc.DBAPIError.instance("SELECT 1", {}, orig, base)

    assert type(translate(wrap(lost, oracledb.Error), URL)) is DatabaseUnavailableError
    assert is_unique_violation(wrap(duplicate, oracledb.Error))
    assert type(translate(wrap(victim, pymssql_module.Error), URL)) is ConflictError
