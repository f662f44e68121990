"""Every driver and SQLAlchemy error becomes an AgentLedgerError here, and only here.

The same condition surfaces as different exception classes per driver (a PostgreSQL
serialization failure is an OperationalError under psycopg and a bare DBAPIError
under asyncpg), so errors are classified by SQLSTATE (PostgreSQL, CockroachDB, and
ODBC's for pyodbc), MySQL errno, SQLite error name, Oracle error code, SQL Server error
number and ``connection_invalidated``, never by class alone and never by message text.
Each dialect has its own tables below; ``_Condition`` gathers one condition's codes
from all of them.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Literal, NamedTuple

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm.exc import StaleDataError

from .errors import (
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

_PG_SERIALIZATION = {"40001", "40P01"}  # CockroachDB's "restart transaction" is 40001 too
_PG_COMMIT_UNKNOWN = {"40003"}
"""statement_completion_unknown: CockroachDB's ambiguous result (the node that held the
transaction was lost while it committed), so the transaction may or may not be stored."""
_PG_LOCKED = {"55P03"}
_PG_PERMISSION = {"42501", "28000", "28P01"}
_PG_READ_ONLY = {"25006"}  # read_only_sql_transaction: a standby, a read-only transaction
_PG_FEATURE_NOT_SUPPORTED = "0A000"
_PG_SETTING_CHECKS = {"call_bool_check_hook", "call_enum_check_hook"}
"""The server routines that refuse a value of a setting (the ``R`` field of an error).
0A000 from them is a transaction mode a server in recovery cannot take: READ WRITE
(``BEGIN READ WRITE`` on a hot standby) or SERIALIZABLE. Other 0A000 errors (a cached
plan whose result type changed, a locking clause PostgreSQL cannot apply) are not a
read-only server, and the message text that would tell them apart is translated."""
_PG_CANCELLED = {"57014"}  # statement_timeout and a cancel request share this code
_PG_DISK_FULL = {"53100"}
_PG_OUT_OF_MEMORY = {"53200"}
_PG_UNAVAILABLE = {"53300"}  # too many connections
_PG_UNAVAILABLE_CLASSES = ("08", "57", "3D")  # connection, shutdown, no database
_MYSQL_SERIALIZATION = {1213}
_MYSQL_LOCKED = {1205}
_MYSQL_PERMISSION = {1044, 1045, 1142, 1143, 1227, 1370}
_MYSQL_READ_ONLY = {1290, 1792, 1836}  # --read-only; a READ ONLY transaction; read-only mode
_MYSQL_CANCELLED = {1317, 1969, 3024}  # interrupted, MariaDB's and MySQL's statement timeout
_MYSQL_DISK_FULL = {1021, 1114}
_MYSQL_OUT_OF_MEMORY = {1037, 1038, 1041}
# 1040/1203: too many connections; 1053/1927/4031: shut down, killed, dropped by the server
_MYSQL_UNAVAILABLE = {1040, 1049, 1053, 1203, 1927, 2002, 2003, 2005, 2006, 2013, 2055, 4031}
_SQLITE_LOCKED = {"SQLITE_BUSY", "SQLITE_LOCKED"}
_SQLITE_BUSY_AT_ONCE = {"SQLITE_BUSY_SNAPSHOT", "SQLITE_BUSY_RECOVERY"}
"""SQLite lock refusals that come without waiting out the busy timeout (with
SQLITE_LOCKED, a conflict inside one process)."""
_SQLITE_PERMISSION = {"SQLITE_PERM", "SQLITE_AUTH"}
_SQLITE_READ_ONLY = {"SQLITE_READONLY"}
_SQLITE_CANCELLED = {"SQLITE_INTERRUPT"}
_SQLITE_DISK_FULL = {"SQLITE_FULL"}
_SQLITE_OUT_OF_MEMORY = {"SQLITE_NOMEM", "SQLITE_IOERR_NOMEM"}
_SQLITE_UNAVAILABLE = {"SQLITE_IOERR"}
_MYSQL_TRANSACTION_GONE = {1305}
"""ROLLBACK TO a SAVEPOINT that no longer exists: the server rolled the whole transaction
back (InnoDB after a deadlock, Galera after aborting it), and the savepoint with it."""
_UNIQUE = {"23505"}
_FOREIGN_KEY = {"23503"}
_MYSQL_UNIQUE = {1062}
_MYSQL_FOREIGN_KEY = {1452}  # a child row whose parent is not stored
_SQLITE_UNIQUE = {"SQLITE_CONSTRAINT_PRIMARYKEY", "SQLITE_CONSTRAINT_UNIQUE"}
_SQLITE_FOREIGN_KEY = {"SQLITE_CONSTRAINT_FOREIGNKEY"}

# Oracle (python-oracledb, cx_Oracle): ``ORA-nnnnn`` from the error object's ``code``, and
# python-oracledb's own ``DPY-nnnn`` from its ``full_code`` (see ``oracle_codes``).
_ORA_UNIQUE = {"ORA-00001"}
# can't serialize access; a deadlock (Oracle rolls back only the statement that found it,
# the unit of work rolls back the rest, so running it again is the remedy, as on PostgreSQL)
_ORA_SERIALIZATION = {"ORA-08177", "ORA-00060"}
# resource busy with NOWAIT, or after ddl_lock_timeout (one code for both, so it is not
# taken for a refusal without a wait: not retryable); FOR UPDATE WAIT n ran out; a wait
# for a library cache lock ran out
_ORA_LOCKED = {"ORA-00054", "ORA-30006", "ORA-04021"}
_ORA_PERMISSION = {"ORA-01031", "ORA-01017", "ORA-01045"}  # privilege; login; CREATE SESSION
_ORA_READ_ONLY = {"ORA-16000"}  # a standby or a database opened READ ONLY
_ORA_CANCELLED = {"ORA-01013", "DPY-4024"}  # a cancel (break); python-oracledb's call_timeout
# unable to extend a table, index, partition, LOB or temporary segment; a tablespace quota
_ORA_DISK_FULL = {"ORA-01536", "ORA-01652", "ORA-01653", "ORA-01654", "ORA-01688", "ORA-01691"}
_ORA_OUT_OF_MEMORY = {"ORA-04030", "ORA-04031"}  # process memory; shared pool
# lost contact (python-oracledb names most of these DPY-4011, keeping the ORA code); no
# listener, service not registered (DPY-6001 in thin mode), connect timeout, connect
# refused (DPY-6005); too many sessions or processes; starting up or shutting down
_ORA_UNAVAILABLE = {
    "ORA-03113", "ORA-03114", "ORA-03135", "ORA-12541", "ORA-12514", "ORA-12170",
    "DPY-4011", "DPY-6001", "DPY-6005", "ORA-00018", "ORA-00020",
    "ORA-01033", "ORA-01034", "ORA-01089", "ORA-01090", "ORA-01092",
}  # fmt: skip

# SQL Server under pymssql: the server's error number, or DB-Library's (20000 and up).
_MSSQL_UNIQUE = {2601, 2627}  # a unique index; a PRIMARY KEY or UNIQUE constraint
_MSSQL_SERIALIZATION = {1205, 3960}  # the deadlock victim; a snapshot isolation update conflict
_MSSQL_LOCKED = {1222}  # LOCK_TIMEOUT ran out
# object, column and CREATE permission; no access to the database; login failed
_MSSQL_PERMISSION = {229, 230, 262, 916, 18456}
_MSSQL_READ_ONLY = {3906}  # the database is read-only (or a readable secondary)
_MSSQL_DISK_FULL = {1105, 9002}  # a filegroup full; the transaction log full
_MSSQL_OUT_OF_MEMORY = {701}
# TCP aborted or reset; no process at the other end of the pipe; DB-Library's timed out,
# write failed, unable to connect, unexpected EOF and dead DBPROCESS (SQLAlchemy's pymssql
# dialect takes 20003/20006/20017/20047 for a disconnect too); Azure SQL's transient
# errors (service error, service busy, database not currently available)
_MSSQL_UNAVAILABLE = {233, 10053, 10054, 20003, 20006, 20009, 20017, 20047, 40197, 40501, 40613}

# SQL Server under pyodbc: only the ODBC SQLSTATE, since the server's number is only in
# the message text. That text is never read, so what a SQLSTATE does not settle stays
# a DatabaseError: 23000 is every integrity violation (a duplicate key, a foreign key, a
# NOT NULL, a CHECK), so no duplicate key is recognised under pyodbc; 42000 is every
# syntax or access violation, a denied permission among them; the other conditions of
# the pymssql tables (a lock timeout, a full disk, a read-only database, low memory) are
# told apart by the number alone.
_ODBC_SERIALIZATION = {"40001"}  # serialization failure: SQL Server's deadlock victim (1205)
_ODBC_COMMIT_UNKNOWN = {"40003"}  # statement completion unknown: the connection failed in it
_ODBC_PERMISSION = {"28000"}  # invalid authorization specification: a login refused (18456)
_ODBC_CANCELLED = {"HYT00", "HY008"}  # the query timeout ran out; cancelled
_ODBC_UNAVAILABLE = {"08001", "08S01", "HYT01"}  # cannot connect; link failure; login timeout


_QUERY_SECRETS = ("password", "passwd")
"""Query parameters drivers take a password from (``?password=`` for every driver,
``?passwd=`` for PyMySQL and MySQLdb)."""


def mask(url: str | URL) -> str:
    """The URL as text with its password replaced by ``***``, in the userinfo and in
    the query string: safe for errors and logs."""
    try:
        parsed = url if isinstance(url, URL) else make_url(url)
    except (sa_exc.ArgumentError, ValueError):  # ValueError: a port that is not a number
        return "<unparseable database URL>"
    hidden = {name: "***" for name in _QUERY_SECRETS if name in parsed.query}
    if hidden:
        parsed = parsed.update_query_dict(hidden)
    return parsed.render_as_string(hide_password=True).replace("=%2A%2A%2A", "=***")


def secrets_of(url: URL) -> list[str]:
    """The passwords ``url`` carries: in its userinfo and in its query string."""
    found = [str(url.password)] if url.password else []
    for name in _QUERY_SECRETS:
        value = url.query.get(name)
        found.extend([value] if isinstance(value, str) else list(value or ()))
    return [secret for secret in found if secret]


def sqlstate(error: BaseException) -> str | None:
    """The SQLSTATE of a driver error (PostgreSQL drivers), if it has one.

    psycopg and asyncpg (the cause under SQLAlchemy's adapter) name it ``sqlstate``,
    psycopg2 ``pgcode``; pg8000 passes the server's error fields as a dict in
    ``args[0]``, where ``C`` is the SQLSTATE (the protocol's field code).
    """
    orig = getattr(error, "orig", error)
    for candidate in (orig, getattr(orig, "__cause__", None)):
        code = getattr(candidate, "sqlstate", None) or getattr(candidate, "pgcode", None)
        if isinstance(code, str):
            return code
        fields = getattr(candidate, "args", ())
        if fields and isinstance(fields[0], dict) and isinstance(fields[0].get("C"), str):
            return str(fields[0]["C"])
    return None


def pg_routine(error: BaseException) -> str | None:
    """The PostgreSQL server routine that raised a driver error (the protocol's ``R``
    field), if the driver passes it on: psycopg's and psycopg2's
    ``diag.source_function``, asyncpg's ``server_source_function`` (the cause under
    SQLAlchemy's adapter), pg8000's ``args[0]["R"]``."""
    orig = getattr(error, "orig", error)
    for candidate in (orig, getattr(orig, "__cause__", None)):
        routine = getattr(getattr(candidate, "diag", None), "source_function", None)
        routine = routine or getattr(candidate, "server_source_function", None)
        if isinstance(routine, str):
            return routine
        fields = getattr(candidate, "args", ())
        if fields and isinstance(fields[0], dict) and isinstance(fields[0].get("R"), str):
            return str(fields[0]["R"])
    return None


def is_read_only_refusal(error: BaseException) -> bool:
    """Whether ``error`` is a write refused because the database or the transaction
    accepts only reads (``ReadOnlyDatabaseError`` says when)."""
    code = sqlstate(error)
    if code is not None:
        return code in _PG_READ_ONLY or (
            code == _PG_FEATURE_NOT_SUPPORTED and pg_routine(error) in _PG_SETTING_CHECKS
        )
    return _Codes.of(error) in _READ_ONLY


def _driver(error: object) -> str:
    """The top-level package of the class of ``error`` (``pymssql``, ``pyodbc``)."""
    return type(error).__module__.partition(".")[0]


def mysql_errno(error: BaseException) -> int | None:
    """The MySQL/MariaDB error number of a driver error, if it has one."""
    orig = getattr(error, "orig", error)
    if _driver(orig) == "pymssql":  # the same shape, with SQL Server's numbers
        return None
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], int) and not isinstance(args[0], bool):
        return args[0]
    return None


def sqlite_name(error: BaseException) -> str | None:
    """The SQLite error name (``SQLITE_BUSY``, ``SQLITE_CONSTRAINT_UNIQUE``...), if any."""
    orig = getattr(error, "orig", error)
    name = getattr(orig, "sqlite_errorname", None)
    return name if isinstance(name, str) else None


def _sqlite_primary(name: str | None) -> str | None:
    """The primary SQLite error name of an extended one (``SQLITE_READONLY_DIRECTORY``
    is a ``SQLITE_READONLY``)."""
    if name is None or not name.startswith("SQLITE_"):
        return name
    return "SQLITE_" + name.removeprefix("SQLITE_").split("_", 1)[0]


def oracle_codes(error: BaseException) -> frozenset[str]:
    """The Oracle error codes of a driver error (``ORA-00001``, ``DPY-4011``), if any.

    python-oracledb and cx_Oracle put an error object in ``args[0]``: its ``code`` is the
    ORA number (0 for the driver's own errors), and python-oracledb's ``full_code`` is
    ``ORA-00001`` or its own ``DPY-nnnn``, to which it renames some database errors while
    keeping their ``code`` (ORA-03113 has ``code`` 3113 and ``full_code`` DPY-4011), so
    both are returned.
    """
    orig = getattr(error, "orig", error)
    args = getattr(orig, "args", ())
    info = args[0] if args else None
    code = getattr(info, "code", None)
    if not hasattr(info, "isrecoverable") or not isinstance(code, int):
        return frozenset()
    full = getattr(info, "full_code", None)
    found: set[str] = {f"ORA-{code:05d}"} if code else set()
    if isinstance(full, str) and full:
        found.add(full)
    return frozenset(found)


def mssql_number(error: BaseException) -> int | None:
    """The SQL Server (or DB-Library) error number of a pymssql error, if it has one.

    pymssql re-raises ``_mssql``'s error with the number and the message as the
    arguments when running a statement (``args == (number, message)``, MySQL's shape:
    the driver's package tells them apart) and as one tuple when connecting
    (``args == ((number, message),)``).
    """
    orig = getattr(error, "orig", error)
    if _driver(orig) != "pymssql":
        return None
    args = getattr(orig, "args", ())
    first = args[0] if args else None
    if isinstance(first, tuple) and first:
        first = first[0]
    return first if isinstance(first, int) and not isinstance(first, bool) else None


def odbc_sqlstate(error: BaseException) -> str | None:
    """The ODBC SQLSTATE of a pyodbc error (``args == (sqlstate, message)``), if any."""
    orig = getattr(error, "orig", error)
    args = getattr(orig, "args", ())
    if _driver(orig) != "pyodbc" or not args or not isinstance(args[0], str):
        return None
    return args[0]


class _Codes(NamedTuple):
    """The codes a driver error carries, one field per kind (``None`` or empty where it
    carries none of that kind)."""

    sqlstate: str | None  # PostgreSQL and CockroachDB drivers
    mysql: int | None
    sqlite: str | None  # the extended name: SQLITE_READONLY_DIRECTORY, say
    oracle: frozenset[str]
    mssql: int | None  # pymssql
    odbc: str | None  # pyodbc

    @classmethod
    def of(cls, error: BaseException) -> _Codes:
        return cls(
            sqlstate(error),
            mysql_errno(error),
            sqlite_name(error),
            oracle_codes(error),
            mssql_number(error),
            odbc_sqlstate(error),
        )

    @property
    def none(self) -> bool:
        """Whether the error carries no code at all."""
        single = (self.sqlstate, self.mysql, self.sqlite, self.mssql, self.odbc)
        return not self.oracle and all(code is None for code in single)


@dataclass(frozen=True)
class _Condition:
    """One condition's codes, from each dialect's table: ``codes in condition`` when
    any of an error's codes is among them. SQLite names match as given or by their
    primary name (``SQLITE_BUSY`` takes in ``SQLITE_BUSY_TIMEOUT``)."""

    pg: Collection[str] = ()
    mysql: Collection[int] = ()
    sqlite: Collection[str] = ()
    oracle: Collection[str] = ()
    mssql: Collection[int] = ()
    odbc: Collection[str] = ()

    def __contains__(self, codes: object) -> bool:
        if not isinstance(codes, _Codes):
            return False
        return (
            codes.sqlstate in self.pg
            or codes.mysql in self.mysql
            or codes.sqlite in self.sqlite
            or _sqlite_primary(codes.sqlite) in self.sqlite
            or any(code in self.oracle for code in codes.oracle)
            or codes.mssql in self.mssql
            or codes.odbc in self.odbc
        )


_DUPLICATE_KEY = _Condition(
    pg=_UNIQUE, mysql=_MYSQL_UNIQUE, sqlite=_SQLITE_UNIQUE, oracle=_ORA_UNIQUE, mssql=_MSSQL_UNIQUE
)
_FOREIGN_KEY_VIOLATION = _Condition(
    pg=_FOREIGN_KEY, mysql=_MYSQL_FOREIGN_KEY, sqlite=_SQLITE_FOREIGN_KEY
)
_COMMIT_UNKNOWN = _Condition(pg=_PG_COMMIT_UNKNOWN, odbc=_ODBC_COMMIT_UNKNOWN)
_SERIALIZATION = _Condition(
    pg=_PG_SERIALIZATION,
    mysql=_MYSQL_SERIALIZATION,
    oracle=_ORA_SERIALIZATION,
    mssql=_MSSQL_SERIALIZATION,
    odbc=_ODBC_SERIALIZATION,
)
_LOCKED = _Condition(
    pg=_PG_LOCKED,
    mysql=_MYSQL_LOCKED,
    sqlite=_SQLITE_LOCKED,
    oracle=_ORA_LOCKED,
    mssql=_MSSQL_LOCKED,
)
_READ_ONLY = _Condition(  # PostgreSQL's needs the routine too: is_read_only_refusal
    mysql=_MYSQL_READ_ONLY, sqlite=_SQLITE_READ_ONLY, oracle=_ORA_READ_ONLY, mssql=_MSSQL_READ_ONLY
)
_PERMISSION = _Condition(
    pg=_PG_PERMISSION,
    mysql=_MYSQL_PERMISSION,
    sqlite=_SQLITE_PERMISSION,
    oracle=_ORA_PERMISSION,
    mssql=_MSSQL_PERMISSION,
    odbc=_ODBC_PERMISSION,
)
_CANCELLED = _Condition(
    pg=_PG_CANCELLED,
    mysql=_MYSQL_CANCELLED,
    sqlite=_SQLITE_CANCELLED,
    oracle=_ORA_CANCELLED,
    odbc=_ODBC_CANCELLED,
)
_DISK_FULL = _Condition(
    pg=_PG_DISK_FULL,
    mysql=_MYSQL_DISK_FULL,
    sqlite=_SQLITE_DISK_FULL,
    oracle=_ORA_DISK_FULL,
    mssql=_MSSQL_DISK_FULL,
)
_OUT_OF_MEMORY = _Condition(
    pg=_PG_OUT_OF_MEMORY,
    mysql=_MYSQL_OUT_OF_MEMORY,
    sqlite=_SQLITE_OUT_OF_MEMORY,
    oracle=_ORA_OUT_OF_MEMORY,
    mssql=_MSSQL_OUT_OF_MEMORY,
)
_UNAVAILABLE = _Condition(  # with PostgreSQL's classes of codes: translate
    pg=_PG_UNAVAILABLE,
    mysql=_MYSQL_UNAVAILABLE,
    sqlite=_SQLITE_UNAVAILABLE,
    oracle=_ORA_UNAVAILABLE,
    mssql=_MSSQL_UNAVAILABLE,
    odbc=_ODBC_UNAVAILABLE,
)


def is_unique_violation(error: BaseException) -> bool:
    """Whether ``error`` is a duplicate key on a primary key or unique constraint."""
    return _Codes.of(error) in _DUPLICATE_KEY


def is_foreign_key_violation(error: BaseException) -> bool:
    """Whether ``error``, or the database error it was translated from, is a row that
    refers to a row not stored (a foreign key violation)."""
    found: BaseException | None = error
    while found is not None:
        if _Codes.of(found) in _FOREIGN_KEY_VIOLATION:
            return True
        found = found.__cause__
    return False


def _is_stale_statement_cache(error: BaseException) -> bool:
    """asyncpg's InvalidCachedStatementError: a statement prepared before another process
    changed the schema (a deploy running a migration). It is raised before the statement
    does anything, and the adapter drops its cache, so the transaction can run again."""
    orig = getattr(error, "orig", None)
    cause = getattr(orig, "__cause__", None)
    return type(cause).__name__ == "InvalidCachedStatementError" and sqlstate(error) == "0A000"


def scrub(text: str, url: URL | None) -> str:
    """``text`` with the passwords of ``url`` masked: in the URL wherever it is written
    out, and each password wherever it stands as a word of its own, never inside
    another word (the password ``nc`` leaves ``nc_nonexistent`` alone)."""
    if url is None:
        return text
    placeholder = "\x00url\x00"  # keeps the masked URL's user name out of the word pass
    for written in {url.render_as_string(hide_password=False), str(url)}:
        text = text.replace(written, placeholder)
    for secret in secrets_of(url):
        text = re.sub(rf"(?<!\w){re.escape(secret)}(?!\w)", "***", text)
    return text.replace(placeholder, mask(url))


def scrub_urls(text: str, urls: Iterable[str]) -> str:
    """``text`` with the passwords of each of ``urls`` masked (``scrub``); a URL that
    does not parse is left out (it cannot be where a driver put a password)."""
    for url in urls:
        with suppress(sa_exc.ArgumentError, ValueError):
            text = scrub(text, make_url(url))
    return text


def _says_only_that_the_transaction_is_gone(error: BaseException) -> bool:
    return isinstance(error, sa_exc.PendingRollbackError) or (
        mysql_errno(error) in _MYSQL_TRANSACTION_GONE
    )


def what_lost_the_transaction(error: BaseException) -> BaseException | None:
    """The database error that aborted the transaction, when ``error`` only says that
    the transaction is gone: SQLAlchemy's PendingRollbackError (a statement after a
    failed one, before the rollback), or MariaDB/MySQL's 1305 (SQLAlchemy's ROLLBACK TO
    SAVEPOINT after a failed flush, when the server had rolled back the whole
    transaction). The cause is in the exception's chain (raised from it, or while it
    was handled): a deadlock there makes the whole a serialization conflict, which a
    retry fixes, where the error on top would be a plain DatabaseError."""
    if not _says_only_that_the_transaction_is_gone(error):
        return None
    seen: set[int] = set()
    chain: list[BaseException | None] = [error]
    while chain:  # both links of each: a driver's error may carry only one of them
        found = chain.pop(0)
        if found is None or id(found) in seen:
            continue
        seen.add(id(found))
        codes = _Codes.of(found)
        coded = codes.sqlite is None and not codes.none  # a server's code
        if coded and not _says_only_that_the_transaction_is_gone(found):
            return found
        chain += [found.__cause__, found.__context__]
    return None


def translate(error: BaseException, url: URL | None) -> AgentLedgerError:
    """The AgentLedgerError that tells a caller what ``error`` means for them."""
    if isinstance(error, AgentLedgerError):
        return error
    if isinstance(error, sa_exc.StatementError) and isinstance(error.orig, AgentLedgerError):
        return error.orig
    where = f" ({mask(url)})" if url is not None else ""
    detail = scrub(
        f"{type(getattr(error, 'orig', error)).__name__}: {getattr(error, 'orig', error)}", url
    )
    if isinstance(error, StaleDataError):
        return ConflictError(f"another writer changed the row first: {error}", reason="stale")
    lost = what_lost_the_transaction(error)
    if lost is not None:
        return translate(lost, url)
    codes = _Codes.of(error)
    code, name, primary = codes.sqlstate, codes.sqlite, _sqlite_primary(codes.sqlite)
    if codes in _COMMIT_UNKNOWN:
        return CommitUnknownError(
            f"the database cannot tell whether the transaction was stored; re-read to find "
            f"out, or write with keys and retry{where}: {detail}"
        )
    if isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated:
        return DatabaseUnavailableError(f"the database connection was lost{where}: {detail}")
    if _is_stale_statement_cache(error):
        stale = DatabaseError(
            f"a cached prepared statement went stale after a schema change{where}: {detail}; "
            "SQLAlchemy has dropped its statement cache, so running the call again works"
        )
        stale.retryable = True
        return stale
    if codes in _SERIALIZATION:
        return ConflictError(
            f"the database aborted the transaction to keep it serializable{where}: {detail}",
            reason="serialization",
        )
    if codes in _LOCKED:
        locked = DatabaseLockedError(f"the database is locked by another writer{where}: {detail}")
        locked.retryable = name in _SQLITE_BUSY_AT_ONCE or primary == "SQLITE_LOCKED"
        return locked
    if is_read_only_refusal(error):
        return ReadOnlyDatabaseError(
            f"the database accepts only reads (a standby or replica, a read-only server, "
            f"transaction or file){where}: {detail}"
        )
    if codes in _PERMISSION:
        return PermissionDeniedError(f"permission denied{where}: {detail}")
    if codes in _CANCELLED:
        return QueryCancelledError(
            f"the database cancelled the statement (its statement timeout ran out, or it "
            f"was cancelled){where}: {detail}"
        )
    if codes in _DISK_FULL:
        return ResourceExhaustedError(
            f"the database is out of disk space{where}: {detail}", resource="disk"
        )
    if codes in _OUT_OF_MEMORY:
        return ResourceExhaustedError(
            f"the database is out of memory{where}: {detail}", resource="memory"
        )
    if primary == "SQLITE_CANTOPEN":
        cannot_open = DatabaseUnavailableError(
            f"cannot open the SQLite database file (a missing folder, no permission, or "
            f"read-only media){where}: {detail}"
        )
        cannot_open.retryable = False  # nothing changes by trying again
        return cannot_open
    if (
        codes in _UNAVAILABLE
        or (code is not None and code.startswith(_PG_UNAVAILABLE_CLASSES))
        or isinstance(error, OSError | sa_exc.DisconnectionError | sa_exc.TimeoutError)
        or (isinstance(error, sa_exc.OperationalError) and codes.none)
    ):
        return DatabaseUnavailableError(f"cannot reach the database{where}: {detail}")
    return DatabaseError(f"database error{where}: {detail}")


class translated:
    """Re-raise any driver, SQLAlchemy or OS error inside the block as an AgentLedgerError.

    A class rather than a generator context manager: every operation enters one, and a
    generator's set-up costs several times as much on a call of tens of microseconds."""

    __slots__ = ("_url",)

    def __init__(self, url: URL | None) -> None:
        self._url = url

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, _: object
    ) -> Literal[False]:
        if isinstance(error, (sa_exc.SQLAlchemyError, OSError)) and not isinstance(
            error, AgentLedgerError
        ):
            raise translate(error, self._url) from error
        return False


@contextmanager
def translated_commit(url: URL | None) -> Iterator[None]:
    """Like ``translated``, around a COMMIT: a server connection lost during it becomes
    ``CommitUnknownError``, since the server may have committed before the reply was
    lost. (SQLite commits in this process: its outcome is always known.)"""
    try:
        yield
    except AgentLedgerError:
        raise
    except (sa_exc.SQLAlchemyError, OSError) as error:
        ours = translate(error, url)
        if type(ours) is DatabaseUnavailableError and (
            url is None or url.get_backend_name() != "sqlite"
        ):
            raise CommitUnknownError(
                f"the connection was lost during COMMIT, so whether the transaction was "
                f"stored is unknown; re-read to find out, or write with keys and retry: {ours}"
            ) from error
        raise ours from error


@contextmanager
def handled(
    condition: Callable[[BaseException], bool], error: Callable[[], AgentLedgerError]
) -> Iterator[None]:
    """Inside the block, a SQLAlchemy error that meets ``condition`` becomes ``error()``
    (which may clean up first, say roll back); any other error goes on as it was."""
    try:
        yield
    except sa_exc.SQLAlchemyError as failure:
        if condition(failure):
            raise error() from failure
        raise


@contextmanager
def duplicate_as(error: Callable[[], AgentLedgerError]) -> Iterator[None]:
    """Inside the block, a duplicate key (primary key or unique constraint) becomes
    ``error()``: the caller knows which key it inserted, the driver does not say."""
    with handled(is_unique_violation, error):
        yield


@contextmanager
def foreign_key_as(error: Callable[[], AgentLedgerError]) -> Iterator[None]:
    """Inside the block, a row referring to a row not stored (a foreign key violation)
    becomes ``error()``: the caller knows which row it expected there."""
    with handled(is_foreign_key_violation, error):
        yield


@contextmanager
def bad_url_as(error: Callable[[], AgentLedgerError]) -> Iterator[None]:
    """Inside the block (parsing a URL), a URL SQLAlchemy cannot parse becomes
    ``error()``: an ArgumentError, or the ValueError of a port that is not a number."""
    try:
        yield
    except (sa_exc.ArgumentError, ValueError):
        raise error() from None


@contextmanager
def missing_driver_as(error: Callable[[Exception], AgentLedgerError]) -> Iterator[None]:
    """Inside the block (building an engine), a database driver that is not installed
    becomes ``error(cause)``."""
    try:
        yield
    except (ModuleNotFoundError, sa_exc.NoSuchModuleError) as failure:
        raise error(failure) from None


@contextmanager
def sqlite_busy_ignored(*, readonly: bool = False) -> Iterator[None]:
    """Inside the block, SQLite refusing with SQLITE_BUSY is dropped: for a statement on a
    driver connection whose effect another connection brings about anyway. With
    ``readonly``, SQLITE_READONLY too: a switch a read-only database cannot make."""
    try:
        yield
    except sqlite3.Error as error:
        name = sqlite_name(error)
        if name != "SQLITE_BUSY" and not (readonly and _sqlite_primary(name) == "SQLITE_READONLY"):
            raise
