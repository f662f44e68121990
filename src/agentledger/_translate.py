"""Every driver and SQLAlchemy error becomes an AgentLedgerError here, and only here.

The same condition surfaces as different exception classes per driver (a PostgreSQL
serialization failure is an OperationalError under psycopg and a bare DBAPIError
under asyncpg), so errors are classified by SQLSTATE, MySQL errno, SQLite error name
and ``connection_invalidated``, never by class alone and never by message text.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Literal

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

_PG_SERIALIZATION = {"40001", "40P01"}
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
    return mysql_errno(error) in _MYSQL_READ_ONLY or (
        _sqlite_primary(sqlite_name(error)) in _SQLITE_READ_ONLY
    )


def mysql_errno(error: BaseException) -> int | None:
    """The MySQL/MariaDB error number of a driver error, if it has one."""
    orig = getattr(error, "orig", error)
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


def is_unique_violation(error: BaseException) -> bool:
    """Whether ``error`` is a duplicate key on a primary key or unique constraint."""
    name = sqlite_name(error)
    if name is not None:
        return name in ("SQLITE_CONSTRAINT_PRIMARYKEY", "SQLITE_CONSTRAINT_UNIQUE")
    return sqlstate(error) in _UNIQUE or mysql_errno(error) == 1062


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
        coded = sqlstate(found) is not None or mysql_errno(found) is not None
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
    if isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated:
        return DatabaseUnavailableError(f"the database connection was lost{where}: {detail}")
    code, errno, name = sqlstate(error), mysql_errno(error), sqlite_name(error)
    if _is_stale_statement_cache(error):
        stale = DatabaseError(
            f"a cached prepared statement went stale after a schema change{where}: {detail}; "
            "SQLAlchemy has dropped its statement cache, so running the call again works"
        )
        stale.retryable = True
        return stale
    if code in _PG_SERIALIZATION or errno in _MYSQL_SERIALIZATION:
        return ConflictError(
            f"the database aborted the transaction to keep it serializable{where}: {detail}",
            reason="serialization",
        )
    primary = _sqlite_primary(name)
    if code in _PG_LOCKED or errno in _MYSQL_LOCKED or primary in _SQLITE_LOCKED:
        locked = DatabaseLockedError(f"the database is locked by another writer{where}: {detail}")
        locked.retryable = name in _SQLITE_BUSY_AT_ONCE or primary == "SQLITE_LOCKED"
        return locked
    if is_read_only_refusal(error):
        return ReadOnlyDatabaseError(
            f"the database accepts only reads (a standby or replica, a read-only server, "
            f"transaction or file){where}: {detail}"
        )
    if code in _PG_PERMISSION or errno in _MYSQL_PERMISSION or primary in _SQLITE_PERMISSION:
        return PermissionDeniedError(f"permission denied{where}: {detail}")
    if code in _PG_CANCELLED or errno in _MYSQL_CANCELLED or primary in _SQLITE_CANCELLED:
        return QueryCancelledError(
            f"the database cancelled the statement (its statement timeout ran out, or it "
            f"was cancelled){where}: {detail}"
        )
    if code in _PG_DISK_FULL or errno in _MYSQL_DISK_FULL or primary in _SQLITE_DISK_FULL:
        return ResourceExhaustedError(
            f"the database is out of disk space{where}: {detail}", resource="disk"
        )
    if code in _PG_OUT_OF_MEMORY or errno in _MYSQL_OUT_OF_MEMORY or name in _SQLITE_OUT_OF_MEMORY:
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
        (code is not None and code.startswith(_PG_UNAVAILABLE_CLASSES))
        or code in _PG_UNAVAILABLE
        or errno in _MYSQL_UNAVAILABLE
        or primary in _SQLITE_UNAVAILABLE
        or isinstance(error, OSError | sa_exc.DisconnectionError | sa_exc.TimeoutError)
        or (isinstance(error, sa_exc.OperationalError) and (code, errno, name) == (None,) * 3)
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
