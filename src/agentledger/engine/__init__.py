"""Engines: URLs and drivers, SQLite set-up, owned versus borrowed engines.

This package is the engine set-up home of dialect differences, one concern a module
(as SQLAlchemy's own ``engine`` package is split):

- ``urls``: URL resolution, the driver maps and the facts a URL gives (``is_sqlite``,
  ``sqlite_file``, ``same_database``, read-only SQLite files).
- ``sqlite``: SQLite's connection set-up and BEGIN IMMEDIATE, borrowed engines, the
  async ledger's sync twin, the migration connection, memdb databases.
- ``pool``: reset on return, the idle ping, timeouts, pgbouncer and aiomysql settings.
- ``loops``: an async ledger's engine per running event loop (connections that belong
  to one loop), a sync ledger's one engine.
- ``transactions``: the execution options a ledger marks its transactions with, the
  read policy, ``brief_transaction``.

This module creates the engines a ledger owns, and names every public name of the
package, so ``from agentledger.engine import ...`` reaches all of them. How driver SQL
begins, which cursor it takes and its autocommit (the ``driver_*`` hooks) are
``agentledger._driver``'s.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import URL
from sqlalchemy.exc import InvalidRequestError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from .._translate import missing_driver_as
from ..errors import ValidationError
from .hosts import connect_to_the_first_that_answers, hosts_of
from .loops import EnginePerLoop, Engines, OneEngine
from .pool import (
    DEFAULT_LOCK_TIMEOUT_S,
    IDLE_PING_S,
    SQLITE_BUSY_TIMEOUT_MS,
    _configure_ping,
    _configure_reset,
    _engine_options,
    configure_timeouts,
    pgbouncer_engine_options,
    repair_aiomysql_bytes,
)
from .sqlite import (
    MemoryDatabase,
    check_borrowed_sqlite,
    configure_sqlite_engine,
    create_sqlite_twin,
    is_configured_sqlite,
    sqlite_migration_connection,
)
from .transactions import (
    ALONE_OPTION,
    ONE_STATEMENT_OPTION,
    WRITE_OPTION,
    brief_transaction,
    read_only_options,
    read_only_transaction,
)
from .urls import (
    DEFAULT_URL,
    URL_ENV,
    _missing_driver,
    check_supported,
    is_read_only,
    is_sqlite,
    mask,
    read_only_sqlite,
    remember_typed_url,
    resolve_url,
    same_database,
    sqlite_file,
    takes_schema,
    typed_url,
    validate_schema,
)

__all__ = [
    "ALONE_OPTION",
    "DEFAULT_LOCK_TIMEOUT_S",
    "DEFAULT_URL",
    "IDLE_PING_S",
    "ONE_STATEMENT_OPTION",
    "SQLITE_BUSY_TIMEOUT_MS",
    "URL_ENV",
    "WRITE_OPTION",
    "EnginePerLoop",
    "Engines",
    "MemoryDatabase",
    "OneEngine",
    "brief_transaction",
    "check_borrowed_sqlite",
    "check_supported",
    "configure_sqlite_engine",
    "configure_timeouts",
    "create_async_engine_for",
    "create_sqlite_twin",
    "create_sync_engine",
    "is_configured_sqlite",
    "is_read_only",
    "is_sqlite",
    "mask",
    "pgbouncer_engine_options",
    "read_only_options",
    "read_only_sqlite",
    "read_only_transaction",
    "remember_typed_url",
    "repair_aiomysql_bytes",
    "resolve_url",
    "same_database",
    "sqlite_file",
    "sqlite_migration_connection",
    "takes_schema",
    "typed_url",
    "validate_schema",
]


def _configure_hosts(engine: Engine, url: URL) -> None:
    """A MariaDB/MySQL URL listing several hosts: connect to the first that answers."""
    hosts = hosts_of(url)
    if hosts:
        connect_to_the_first_that_answers(engine, hosts)


def create_sync_engine(url: str | URL | None = None, **options: Any) -> Engine:
    """A sync Engine configured for agentledger (SQLite pragmas and BEGIN IMMEDIATE); a
    SQLite file this process cannot write is opened read-only (``read_only_sqlite``)."""
    resolved = read_only_sqlite(resolve_url(url, asynchronous=False))
    with missing_driver_as(lambda cause: _missing_driver(resolved, cause)):
        engine = create_engine(resolved, **{**_engine_options(resolved), **options})
    configure_sqlite_engine(engine)
    _configure_hosts(engine, resolved)
    _configure_reset(engine, options)
    _configure_ping(engine, options)
    remember_typed_url(engine, url)
    return engine


def create_async_engine_for(url: str | URL | None = None, **options: Any) -> AsyncEngine:
    """An AsyncEngine configured for agentledger (SQLite pragmas and BEGIN IMMEDIATE); a
    SQLite file this process cannot write is opened read-only (``read_only_sqlite``)."""
    resolved = read_only_sqlite(resolve_url(url, asynchronous=True))
    with missing_driver_as(lambda cause: _missing_driver(resolved, cause)):
        try:
            engine = create_async_engine(resolved, **{**_engine_options(resolved), **options})
        except InvalidRequestError as error:
            # Only a URL of an untested dialect gets here with a sync driver: the
            # others' are swapped for their async twins (resolve_url).
            if resolved.get_dialect().is_async:
                raise
            raise ValidationError(
                f"{mask(resolved)}: its driver ({resolved.get_driver_name()}) is not an "
                "asyncio driver, which AsyncLedger needs; use Ledger, or name an async "
                "driver in the URL (dialect+driver://)",
                path="url",
            ) from error
    configure_sqlite_engine(engine.sync_engine)
    _configure_hosts(engine.sync_engine, resolved)
    _configure_reset(engine.sync_engine, options)
    _configure_ping(engine.sync_engine, options)
    remember_typed_url(engine.sync_engine, url)
    return engine
