"""Driver SQL: prebuilt Core statements, compiled once per driver, run on the DBAPI
cursor of a pooled connection, outside SQLAlchemy's execution layer and ORM Session.

Why: on a call of a fraction of a millisecond, SQLAlchemy's per-execution work (the
execution context, the compiled-cache lookup, result wrapping) and the ORM Session's
transaction bookkeeping cost more than the database's own work. research/feasibility.md
measured Core at 1.5 to 2.9 times the raw driver and driver SQL on a pooled connection
at 1.2 to 1.3 times; LangGraph's own savers are raw driver calls on one connection.
The statements stay SQLAlchemy's: built with Core, compiled by the engine's dialect
(its SQL and parameter style), each value bound by its column type's own bind
processor and read back by its result processor, so a row reads as it would through
SQLAlchemy. Driver errors are wrapped as SQLAlchemy's ``DBAPIError`` (a lost
connection invalidated, as SQLAlchemy does), so agentledger's translation and retry
rules apply unchanged.

Where it runs is the ledger's ``driver_sql`` option, read once by its runner
(``_runner``): on (the default) where ``available`` says it can (the database family's
capability ``driver_sql``: SQLite and PostgreSQL; an engine the ledger created, whose
connections no one else configures; no PostgreSQL schema map), or off, every statement
through SQLAlchemy. Only the operations marked ``on_driver`` take it (LangGraph's hot
calls). SQLAlchemy's
engine logging sees its statements: each is logged by the engine's logger as
SQLAlchemy logs its own (the SQL, then its parameters, tagged ``[driver SQL]``), with
its COMMIT and ROLLBACK. Statement listeners
(``before_cursor_execute``, ``after_cursor_execute``) take a SQLAlchemy ``Connection``
and execution context that driver SQL does not have: with one on the engine, the path
steps aside (``steps_aside``) and the same statements go through SQLAlchemy, where the
listener sees them.

The transaction of one call, by database and by how the ledger reads
(``transaction``; no other mode exists):

================================  ===================  ============================  ===========
database, call                    begins               a second statement            ends
================================  ===================  ============================  ===========
SQLite, write                     ``BEGIN IMMEDIATE``  in the transaction            ``COMMIT``
SQLite, read                      nothing: one         atomic by itself              nothing
                                  statement in the     (``ALONE_OPTION``): the same;
                                  driver's autocommit  else ``NeedsTransaction``:
                                  is one snapshot      the call runs on SQLAlchemy
PostgreSQL, reads in AUTOCOMMIT   nothing: the first   atomic by itself: the same;   ``COMMIT``
(``read_only_options``), read     statement is atomic  else the driver leaves        of the rest
or write                          by itself (a write's autocommit, the rest is one
                                  COMMIT is its own)   transaction
PostgreSQL otherwise (REPEATABLE  the driver, at the   in the transaction            ``COMMIT``
READ, SERIALIZABLE, a pooler in   first statement
transaction mode), read or write
================================  ===================  ============================  ===========
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, cast

from sqlalchemy import Engine
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Dialect
from sqlalchemy.sql.util import _repr_params

from ._dialects import capabilities
from ._translate import translated_commit
from .engine import ALONE_OPTION
from .engine.sqlite import _sqlite_begin
from .records import collector_paused

_MOST_PREPARED = 2_000
"""Compiled statements kept per process before the cache starts over (they are
prebuilt, module-level statements: a handful per row count)."""


class Fallback(Exception):
    """Raised inside an operation on driver SQL when it needs what only SQLAlchemy has
    (an ORM Session, a statement that cannot be prebuilt): its transaction is rolled
    back and the caller runs the operation through SQLAlchemy instead."""


class NotPrebuilt(Fallback):
    """A statement driver SQL cannot run as compiled (an expanding IN list)."""


class NeedsTransaction(Fallback):
    """A second statement on a connection in the driver's autocommit."""


class _Prepared:
    """One statement compiled for one driver: its SQL, how to bind, how to read."""

    def __init__(self, statement: Any, dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect)
        if "__[POSTCOMPILE_" in compiled.string:
            raise NotPrebuilt("an expanding parameter")
        self.statement = statement  # kept alive: the cache is keyed by its id
        self.alone = bool(statement.get_execution_options().get(ALONE_OPTION, False))
        self.sql: str = compiled.string
        self.positional: bool = bool(compiled.positional)
        self.order: list[str] = list(compiled.positiontup or [])
        escaped: dict[str, str] = getattr(compiled, "escaped_bind_names", None) or {}
        self.names = {name: escaped.get(name, name) for name in compiled.binds}
        self.defaults = {
            name: bind.value
            for name, bind in compiled.binds.items()
            if not bind.required and bind.callable is None
        }
        self.binders: list[tuple[str, Callable[[Any], Any]]] = []
        for name, bind in compiled.binds.items():
            processor = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if processor is not None:
                self.binders.append((name, processor))
        self.row: Any = None
        self.readers: list[tuple[int, Callable[[Any], Any]]] = []
        if not hasattr(statement, "selected_columns") and list(statement.exported_columns):
            raise NotPrebuilt("a statement with RETURNING")
        if hasattr(statement, "selected_columns"):
            columns = list(statement.selected_columns)
            self.row = namedtuple("Row", [column.key for column in columns], rename=True)  # type: ignore[misc]
            for position, column in enumerate(columns):
                reader = column.type.dialect_impl(dialect).result_processor(dialect, None)
                if reader is not None:
                    self.readers.append((position, reader))

    def parameters(self, values: dict[str, Any]) -> Any:
        """The driver's parameters for ``values`` (positional or named, bound)."""
        bound = {**self.defaults, **values}
        for name, processor in self.binders:
            if name in bound:
                bound[name] = processor(bound[name])
        if self.positional:
            return tuple(bound[name] for name in self.order)
        return {self.names[name]: value for name, value in bound.items()}

    def rows(self, fetched: list[Any]) -> list[Any]:
        """The fetched tuples as rows with the statement's column names, read back."""
        make = self.row._make
        with collector_paused():  # thousands of new rows: see records.collector_paused
            if not self.readers:
                return list(map(make, fetched))
            result = []
            for row in fetched:
                values = list(row)
                for position, reader in self.readers:
                    values[position] = reader(values[position])
                result.append(make(values))
            return result


_PREPARED: dict[tuple[str, str, str, int], _Prepared] = {}


class DriverResult:
    """The rows of one statement (read at once) and how many rows it changed."""

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def all(self) -> list[Any]:
        """Every row."""
        return self._rows

    def first(self) -> Any:
        """The first row, or None."""
        return self._rows[0] if self._rows else None

    def scalar_one_or_none(self) -> Any:
        """The first column of the only row, or None; more than one row is an error."""
        if len(self._rows) > 1:
            raise sa_exc.MultipleResultsFound("more than one row")
        return self._rows[0][0] if self._rows else None

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)


class DriverConnection:
    """What a repository's statements need of a Connection (``dialect``, ``execute``),
    on a DBAPI connection."""

    def __init__(
        self,
        dbapi_connection: Any,
        dialect: Dialect,
        *,
        one_statement: bool,
        commits: bool = False,
        url: URL | None = None,
        log: Callable[..., None] | None = None,
        hide_parameters: bool = False,
    ) -> None:
        self.dialect = dialect
        self._log = log
        """The engine logger's ``info`` when SQL logging is on (``echo``, or the
        ``sqlalchemy.engine`` logger at INFO); None when it is off."""
        self._hide_parameters = hide_parameters
        self._dbapi = dbapi_connection
        self._one_statement = one_statement
        self._commits = commits
        """Whether its one statement is a write's COMMIT (a write in autocommit)."""
        self._url = url
        self._sent = 0
        self._key = (dialect.name, dialect.driver, str(dialect.paramstyle))
        self._execute_options = driver_execute_options(dialect)
        self.commit_sent = False
        """Whether COMMIT was sent (set by ``transaction``)."""
        self.lost = False
        """Whether a statement found the connection lost (``transaction`` then throws it
        away rather than hand it back to the pool: the error reaching it may be
        agentledger's translation already)."""

    @property
    def in_autocommit(self) -> bool:
        """Whether the block still runs in the driver's autocommit (no transaction to
        commit or roll back)."""
        return self._one_statement

    def execute(
        self, statement: Any, parameters: dict[str, Any] | list[dict[str, Any]] | None = None
    ) -> DriverResult:
        """Run a prebuilt statement with ``parameters`` (a list: once per item, as an
        executemany, which returns no rows); its rows, read at once.

        A second statement of a block in the driver's autocommit begins a transaction
        for the rest of it where the dialect can (``engine.driver_begin_after_first``),
        unless it is atomic by itself (``engine.ALONE_OPTION``): it then runs in
        autocommit too.

        Raises:
            NeedsTransaction: a second statement in the driver's autocommit where it
                cannot (the first must have written nothing: see ``transaction``).
        """
        key = (*self._key, id(statement))
        prepared = _PREPARED.get(key)
        if prepared is None or prepared.statement is not statement:
            if len(_PREPARED) >= _MOST_PREPARED:
                _PREPARED.clear()
            prepared = _PREPARED[key] = _Prepared(statement, self.dialect)
        if self._one_statement and self._sent and not prepared.alone:
            if not driver_begin_after_first(self._dbapi, self.dialect):
                raise NeedsTransaction("a second statement needs a transaction")
            self._one_statement = self._commits = False
        self._sent += 1
        self.commit_sent = self._commits  # in autocommit, a write is its own COMMIT
        bound: Any
        many = isinstance(parameters, list)
        if many:
            bound = [prepared.parameters(each) for each in cast(list[Any], parameters)]
        else:
            bound = prepared.parameters(cast(dict[str, Any], parameters or {}))
        if self._log is not None:
            self._log_statement(prepared.sql, bound, many)
        cursor = driver_cursor(self._dbapi, self.dialect)
        try:
            if many:
                cursor.executemany(prepared.sql, bound)
            else:
                cursor.execute(prepared.sql, bound, **self._execute_options)
            # Whether rows come back is known from the statement: reading the cursor's
            # description builds column objects (psycopg: tens of microseconds).
            fetched = cursor.fetchall() if prepared.row is not None and not many else []
            rowcount = cursor.rowcount
        except self.dialect.loaded_dbapi.Error as error:
            wrapped = _wrapped(error, prepared.sql, bound, self.dialect, self._dbapi)
            self.lost = self.lost or wrapped.connection_invalidated
            if self._commits:
                # A connection lost during a write's own COMMIT: its outcome is unknown.
                with translated_commit(self._url):
                    raise wrapped from error
            raise wrapped from error
        finally:
            cursor.close()
        rows = prepared.rows(fetched) if prepared.row is not None else []
        return DriverResult(rows, rowcount)

    def _log_statement(self, sql: str, bound: Any, many: bool) -> None:
        """Log a statement as SQLAlchemy's ``Connection`` logs its own: the SQL, then
        its parameters (or that they are hidden), tagged ``[driver SQL]``."""
        assert self._log is not None
        self._log(sql)
        if self._hide_parameters:
            self._log("[driver SQL] [SQL parameters hidden due to hide_parameters=True]")
        else:
            self._log("[driver SQL] %r", _repr_params(bound, batches=10, ismulti=many))

    def log(self, message: str) -> None:
        """Log a transaction's ``BEGIN``, ``COMMIT`` or ``ROLLBACK`` when SQL logging is on."""
        if self._log is not None:
            self._log(message)


def driver_one_statement(dialect: Dialect, read_options: dict[str, Any], *, writes: bool) -> bool:
    """Whether a driver SQL call runs as one statement in the driver's autocommit, with
    no BEGIN and COMMIT (``_driver.transaction``). PostgreSQL where the ledger's reads
    are AUTOCOMMIT (``read_only_options``), writes too (their one statement is atomic by
    itself). SQLite's reads: its connections are in the driver's autocommit already
    (``configure_sqlite_engine``), and one statement there is its own read transaction,
    one snapshot, as SQLAlchemy's reads of one statement run (``ONE_STATEMENT_OPTION``);
    its BEGIN and COMMIT were a third of a ``get_tuple``'s SQLite calls."""
    if dialect.name == "sqlite":
        return not writes
    return read_options.get("isolation_level") == "AUTOCOMMIT"


def driver_begin_sql(dialect: Dialect, *, writes: bool) -> str | None:
    """The SQL that begins a transaction on a driver connection of this dialect, as
    SQLAlchemy's transactions begin here: SQLite's connections are in the driver's
    autocommit (``configure_sqlite_engine``), so its ``BEGIN`` (``IMMEDIATE`` for a
    write) is sent explicitly. None elsewhere: the driver begins at the first
    statement."""
    return _sqlite_begin(writes) if dialect.name == "sqlite" else None


def driver_cursor(dbapi_connection: Any, dialect: Dialect) -> Any:
    """A cursor for driver SQL. Sync psycopg's in its binary format, as LangGraph's
    PostgresSaver uses: in text, bytes travel as hex, twice their size, and are decoded
    again (a 70 KB channel value: a fifth of a read's time). psycopg's async adapter
    takes no format."""
    if dialect.driver == "psycopg" and not dialect.is_async:
        return dbapi_connection.cursor(binary=True)
    return dbapi_connection.cursor()


def driver_autocommit(dbapi_connection: Any, dialect: Dialect, enabled: bool) -> None:
    """Switch a driver SQL connection into the driver's autocommit and back (a block of
    one statement, ``_driver.transaction``). Sync psycopg: its ``autocommit`` alone,
    which leaves the connection's isolation level as it was; SQLAlchemy's switch to
    ``AUTOCOMMIT`` also clears the isolation level and its reset sets it again, four
    driver calls (3.3% of a ``get_tuple``, sampled, against 1.8%). Elsewhere, SQLAlchemy's."""
    if dialect.name == "sqlite":
        return  # always in the driver's autocommit (``configure_sqlite_engine``)
    if dialect.driver == "psycopg" and not dialect.is_async:
        dbapi_connection.autocommit = enabled
    elif enabled:
        dialect.set_isolation_level(dbapi_connection, "AUTOCOMMIT")
    else:
        dialect.reset_isolation_level(dbapi_connection)


def driver_begin_after_first(dbapi_connection: Any, dialect: Dialect) -> bool:
    """Begin a transaction on a driver SQL connection in the driver's autocommit after
    its first statement (which wrote nothing: ``_driver.transaction``), for the rest of
    the block; whether it could. PostgreSQL: the driver is switched out of autocommit,
    and begins at the next statement; at READ COMMITTED the first statement's snapshot
    was its own anyway. Not on SQLite, where a read's statements share one snapshot
    only inside its transaction: the first would be outside it."""
    if dialect.name == "sqlite":
        return False
    driver_autocommit(dbapi_connection, dialect, False)
    return True


def driver_execute_options(dialect: Dialect) -> dict[str, Any]:
    """Keyword arguments of a driver SQL ``cursor.execute``. Sync psycopg: prepare each
    statement on its first run, as PostgresSaver does (``prepare_threshold=0``), rather
    than after psycopg's default five: driver SQL runs a handful of prebuilt statements,
    and unprepared, a put's CTEs are parsed and planned again on every run (a fresh
    connection's first puts took 1.0 ms against 0.65 ms once prepared). psycopg ignores
    it where preparing is off (``prepare_threshold=None``: ``pgbouncer_engine_options``)."""
    if dialect.driver == "psycopg" and not dialect.is_async:
        return {"prepare": True}
    return {}


def unavailable(engine: Engine, *, owns_engine: bool, schema: str | None) -> str | None:
    """Why driver SQL cannot run on ``engine`` (see the module's docstring), or None
    when it can."""
    if not capabilities(engine.dialect).driver_sql:
        return f"the {engine.dialect.name} dialect has no driver SQL path"
    if not owns_engine:
        return "the ledger runs on a borrowed engine, whose connections are yours"
    if schema is not None:
        return "a schema= map needs SQLAlchemy's schema translation"
    return None


def steps_aside(engine: Engine) -> bool:
    """Whether a statement listener is on ``engine``, which must see every statement:
    the calls then run through SQLAlchemy."""
    dispatch = engine.dispatch
    return bool(dispatch.before_cursor_execute or dispatch.after_cursor_execute)


@contextmanager
def transaction(
    engine: Engine, *, writes: bool, autocommit: bool, url: URL | None = None
) -> Iterator[DriverConnection]:
    """A transaction on a pooled connection of ``engine``, committed when the block
    ends (rolled back on an error), the connection back in the pool after. SQLite:
    ``BEGIN IMMEDIATE`` for a write, ``BEGIN`` for a read, as ``engine`` does for
    SQLAlchemy's transactions (its connections are in the driver's autocommit).

    ``autocommit`` (``driver_one_statement``: PostgreSQL at READ COMMITTED,
    SQLite's reads): the block's first statement runs in the driver's autocommit,
    atomic by itself and one snapshot, with no BEGIN and COMMIT round trips; the driver
    is switched back after. A second statement atomic by itself
    (``engine.ALONE_OPTION``) runs in autocommit too; another begins a transaction for
    the rest of the block (PostgreSQL), or gets ``NeedsTransaction`` and the call runs
    through SQLAlchemy instead (SQLite). Either way the statements before it must have
    written nothing (``repositories.langgraph.statements.insert_for_session_key``
    writes only when it finds the session; when it finds none, the call goes on to
    create it).

    The connection's ``commit_sent`` says whether a write's COMMIT went out (its
    outcome may be unknown after that: a connection lost during a write's one statement
    in autocommit is ``CommitUnknownError``, given ``url``)."""
    dialect = engine.dialect
    pooled = engine.raw_connection()
    dbapi_connection: Any = pooled.dbapi_connection
    begin = None if autocommit else driver_begin_sql(dialect, writes=writes)
    connection = DriverConnection(
        dbapi_connection,
        dialect,
        one_statement=autocommit,
        commits=autocommit and writes,
        url=url,
        log=engine.logger.info if engine._should_log_info() else None,
        hide_parameters=engine.hide_parameters,
    )
    switched = False
    try:
        try:
            if begin is not None:
                connection.log(begin)
                cursor = dbapi_connection.cursor()
                try:
                    cursor.execute(begin)
                finally:
                    cursor.close()
            elif autocommit:
                driver_autocommit(dbapi_connection, dialect, True)
                switched = True
            yield connection
            connection.commit_sent = True
            if not connection.in_autocommit:
                connection.log("COMMIT")
            dbapi_connection.commit()
        except dialect.loaded_dbapi.Error as error:
            raise _wrapped(error, None, None, dialect, dbapi_connection) from error
    except BaseException as error:
        lost = isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated
        # Interrupted (a cancelled task, KeyboardInterrupt), the driver may not know what
        # the server ran: asyncpg keeps the record of a BEGIN it sent but never heard
        # back from, no ROLLBACK is sent for it, and the next transaction on the
        # connection became a SAVEPOINT inside that one, whose COMMIT stored nothing.
        # Such a connection is thrown away, as SQLAlchemy's transport does.
        interrupted = not isinstance(error, Exception)
        if lost or interrupted or connection.lost:
            pooled.invalidate()
            switched = False
        else:
            if not connection.in_autocommit:
                connection.log("ROLLBACK")
            _quietly(dbapi_connection.rollback, dialect)
        raise
    finally:
        if switched:
            _quietly(lambda: driver_autocommit(dbapi_connection, dialect, False), dialect)
        pooled.close()


def _quietly(call: Callable[[], Any], dialect: Dialect) -> None:
    """A clean-up after an error: one of its own must not hide the first (the pool's
    reset on return rolls back again, or throws the connection away)."""
    with suppress(dialect.loaded_dbapi.Error):
        call()


def _wrapped(
    error: Exception, sql: str | None, parameters: Any, dialect: Dialect, dbapi_connection: Any
) -> sa_exc.DBAPIError:
    """``error`` as SQLAlchemy would raise it: a ``DBAPIError`` of the matching class,
    ``connection_invalidated`` when the dialect reads it as a lost connection."""
    lost = bool(dialect.is_disconnect(error, dbapi_connection, None))  # type: ignore[arg-type]
    wrapped = sa_exc.DBAPIError.instance(
        sql,
        parameters,
        error,
        dialect.loaded_dbapi.Error,
        hide_parameters=True,
        connection_invalidated=lost,
        dialect=dialect,
    )
    return wrapped  # type: ignore[return-value]
