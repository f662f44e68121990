"""Run agentledger's migrations: find the shipped scripts, upgrade, check, render SQL.

The scripts are the top-level ``alembic/`` folder of the source tree; an installed
wheel carries the same files as the package resource ``agentledger/_migrations``.
Every entry point (this module, ``agentledger db``, plain ``alembic`` from a
checkout) goes through ``run_environment``, so each takes the same database lock,
writes the same version table (``agentledger_alembic_version``) and never touches a
host application's ``alembic_version``.

From async code, hand a sync connection over with ``run_sync``::

    async with engine.connect() as connection:
        await connection.run_sync(agentledger.migrations.upgrade)
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, TextIO, TypeAlias

from alembic import command
from alembic.config import Config
from alembic.environment import EnvironmentContext
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, Engine, MetaData, column, inspect, select, table, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from ._dialects import migration_lock
from ._translate import translate
from .engine import (
    create_sync_engine,
    mask,
    resolve_url,
    sqlite_migration_connection,
    validate_schema,
)
from .errors import AgentLedgerError, SchemaError, ValidationError
from .models import TABLE_PREFIX, VERSION_TABLE, metadata

Target: TypeAlias = "str | URL | Engine | Connection"
"""Where to migrate: a URL, an Engine (connected and released here) or a Connection
(used as it is; its transaction, if any, stays the caller's)."""

SCHEMA_ATTRIBUTE = "agentledger_schema"
"""Config.attributes key the revision scripts read the PostgreSQL schema from."""

SQLITE_OFFLINE_REFUSAL = (
    "offline SQL is not available for SQLite: its migrations rebuild tables in batch "
    "mode, which needs a live database"
)

# Alembic's `context` is process-global: two threads running commands at once would
# share it. Database-level locks (see _dialects.migration_lock) serialise processes.
_process_lock = threading.RLock()


def script_location() -> Path:
    """The folder holding env.py and versions/: the package resource when installed
    from a wheel, else the source tree's top-level ``alembic/``."""
    packaged = resources.files("agentledger") / "_migrations"
    if packaged.is_dir():
        return Path(str(packaged))
    source_tree = Path(__file__).resolve().parents[2] / "alembic"
    if (source_tree / "env.py").is_file():
        return source_tree
    raise SchemaError(
        "agentledger's migration scripts are missing from this installation",
        hint="reinstall agentledger (pip install --force-reinstall agentledger)",
    )


def alembic_config(*, schema: str | None = None, output_buffer: TextIO | None = None) -> Config:
    """An Alembic Config for agentledger's scripts, built in code (no ini file needed).

    ``output_buffer`` receives offline (``--sql``) output instead of stdout.
    """
    config = Config(output_buffer=output_buffer)
    config.set_main_option("script_location", str(script_location()))
    config.attributes[SCHEMA_ATTRIBUTE] = schema
    return config


@cache
def head() -> str:
    """The newest revision this package ships."""
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    if len(heads) != 1:
        raise SchemaError(f"agentledger's migrations have {len(heads)} heads: {heads}")
    return heads[0]


def upgrade(target: Target, revision: str = "head", *, schema: str | None = None) -> None:
    """Upgrade agentledger's tables to ``revision``; a no-op when already there."""
    with _translated(target), _connected(target) as connection, _process_lock:
        config = alembic_config(schema=schema)
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def downgrade(target: Target, revision: str, *, schema: str | None = None) -> None:
    """Downgrade agentledger's tables to ``revision`` (``base`` drops them all)."""
    with _translated(target), _connected(target) as connection, _process_lock:
        config = alembic_config(schema=schema)
        config.attributes["connection"] = connection
        command.downgrade(config, revision)


def current(target: Target, *, schema: str | None = None) -> str | None:
    """The revision the database is at, or None when agentledger's tables are absent."""
    with _translated(target), _connected(target) as connection:
        validate_schema(schema, connection.dialect.name)
        began = not connection.in_transaction()
        context = MigrationContext.configure(
            connection,
            opts={"version_table": VERSION_TABLE, "version_table_schema": schema},
        )
        try:
            return context.get_current_revision()
        finally:
            if began and connection.in_transaction():
                connection.rollback()


def upgrade_hint(url: str | URL | None = None, *, schema: str | None = None) -> str:
    """The command that brings a database's agentledger tables to head."""
    parts = ["agentledger db upgrade"]
    if url is not None:
        parts.append(f"--url '{mask(url)}'")
    if schema:
        parts.append(f"--schema {schema}")
    return " ".join(parts)


def check(target: Target, *, schema: str | None = None) -> None:
    """Raise SchemaError unless the database is at this package's head revision."""
    at = current(target, schema=schema)
    expected = head()
    if at == expected:
        return
    hint = upgrade_hint(_url_of_target(target), schema=schema)
    if at is None:
        raise SchemaError(
            f"agentledger's tables are missing from this database (it needs revision {expected})",
            head=expected,
            hint=hint,
        )
    if at not in _known_revisions():
        raise SchemaError(
            f"the database is at agentledger revision {at}, newer than this package knows "
            f"(head {expected})",
            current=at,
            head=expected,
            hint="upgrade the agentledger package",
        )
    raise SchemaError(
        f"the database is at agentledger revision {at}, behind this package's {expected}",
        current=at,
        head=expected,
        hint=hint,
    )


def sql(
    url: str | URL | None,
    revision: str = "head",
    *,
    from_revision: str | None = None,
    schema: str | None = None,
) -> str:
    """Render the upgrade as SQL for a DBA to review (PostgreSQL and MySQL/MariaDB only).

    ``url`` only chooses the dialect (``postgresql://`` is enough); nothing connects.
    SQLite is refused with SchemaError: its migrations rebuild tables in batch mode,
    which needs a live database.
    """
    resolved = resolve_url(url, asynchronous=False)
    if resolved.get_backend_name() == "sqlite":
        raise SchemaError(SQLITE_OFFLINE_REFUSAL, hint=_SQLITE_OFFLINE_HINT)
    validate_schema(schema, resolved.get_backend_name())
    buffer = io.StringIO()
    config = alembic_config(schema=schema, output_buffer=buffer)
    config.attributes["offline_url"] = resolved
    span = f"{from_revision}:{revision}" if from_revision else revision
    with _translated(resolved), _process_lock:
        command.upgrade(config, span, sql=True)
    return buffer.getvalue()


def include_agentledger_names(name: str | None, type_: str, _parents: Any) -> bool:
    """Autogenerate filter of agentledger's own environment: only our tables."""
    if type_ == "table":
        return name is not None and name.startswith(TABLE_PREFIX)
    return True


def exclude_agentledger_names(name: str | None, type_: str, _parents: Any) -> bool:
    """Autogenerate filter for a host application's env.py: everything but our tables.

    Pass it as ``include_name=`` (or call it from the host's own filter) so the
    host's ``alembic revision --autogenerate`` never proposes dropping agentledger's
    tables or its version table.
    """
    return not (type_ == "table" and name is not None and name.startswith(TABLE_PREFIX))


@cache
def _known_revisions() -> frozenset[str]:
    script = ScriptDirectory.from_config(alembic_config())
    return frozenset(rev.revision for rev in script.walk_revisions())


_SQLITE_OFFLINE_HINT = (
    "run `agentledger db upgrade --url sqlite:///...` against the database, or render "
    "SQL for PostgreSQL or MySQL with --url postgresql:// or --url mysql://"
)


def _url_of_target(target: Target) -> str | URL:
    if isinstance(target, Connection):
        return target.engine.url
    if isinstance(target, Engine):
        return target.url
    return target


@contextmanager
def _translated(target: Target) -> Iterator[None]:
    """Turn Alembic, SQLAlchemy and driver errors into agentledger's own.

    A revision Alembic cannot find is the caller's input: ValidationError. Database
    errors go through the one translator (_translate), which masks the password.
    """
    try:
        yield
    except AgentLedgerError:
        raise
    except CommandError as exc:
        raise ValidationError(str(exc), path="revision") from exc
    except (SQLAlchemyError, OSError) as exc:
        raise translate(exc, _resolved_url(target)) from exc


def _resolved_url(target: Target) -> URL | None:
    try:
        return resolve_url(_url_of_target(target), asynchronous=False)
    except AgentLedgerError:
        return None


@contextmanager
def _connected(target: Target) -> Iterator[Connection]:
    if isinstance(target, Connection):
        yield target
        return
    owned = not isinstance(target, Engine)
    engine = (
        target if isinstance(target, Engine) else create_sync_engine(target, poolclass=NullPool)
    )
    try:
        with engine.connect() as connection:
            yield connection
            if connection.in_transaction():
                connection.commit()
    finally:
        if owned:
            engine.dispose()


def _target_metadata(schema: str | None) -> MetaData:
    if schema is None:
        return metadata
    copy = MetaData(naming_convention=metadata.naming_convention)
    for table_ in metadata.sorted_tables:
        table_.to_metadata(copy, schema=schema)
    return copy


def _include_names_in(schema: str) -> Callable[[str | None, str, Any], bool]:
    def include(name: str | None, type_: str, parents: Any) -> bool:
        if type_ == "schema":
            return name == schema
        return include_agentledger_names(name, type_, parents)

    return include


def _url_of(context: EnvironmentContext) -> URL:
    offline = context.config.attributes.get("offline_url")
    if offline is not None:
        return offline  # type: ignore[no-any-return]
    x_url = context.get_x_argument(as_dictionary=True).get("url")
    return resolve_url(x_url, asynchronous=False)


def run_environment(context: EnvironmentContext) -> None:
    """The body of agentledger's env.py: configure Alembic and run the migrations."""
    config = context.config
    schema = config.attributes.get(SCHEMA_ATTRIBUTE)
    if schema is None:
        schema = context.get_x_argument(as_dictionary=True).get("schema")
    config.attributes[SCHEMA_ATTRIBUTE] = schema
    options: dict[str, Any] = {
        "target_metadata": _target_metadata(schema),
        "version_table": VERSION_TABLE,
        "version_table_schema": schema,
        "include_name": include_agentledger_names,
        "compare_type": True,
        "render_as_batch": True,
    }
    if schema is not None:
        # Autogenerate (`alembic check`) must look in the schema, and only there.
        options["include_schemas"] = True
        options["include_name"] = _include_names_in(schema)
    if context.is_offline_mode():
        _run_offline(context, schema, options)
        return
    connectable = config.attributes.get("connection")
    if isinstance(connectable, Connection):
        _run_online(context, connectable, schema, options)
        return
    target = connectable if connectable is not None else _url_of(context)
    with _translated(target), _connected(target) as connection:
        _run_online(context, connection, schema, options)


def _run_offline(context: EnvironmentContext, schema: str | None, options: dict[str, Any]) -> None:
    url = _url_of(context)
    if url.get_backend_name() == "sqlite":
        raise SchemaError(SQLITE_OFFLINE_REFUSAL, hint=_SQLITE_OFFLINE_HINT)
    validate_schema(schema, url.get_backend_name())
    context.configure(
        url=url,
        literal_binds=True,
        transaction_per_migration=True,
        dialect_opts={"paramstyle": "named"},
        **options,
    )
    with context.begin_transaction():
        context.run_migrations()


def _run_online(
    context: EnvironmentContext,
    connection: Connection,
    schema: str | None,
    options: dict[str, Any],
) -> None:
    validate_schema(schema, connection.dialect.name)
    with migration_lock(connection):
        _refuse_foreign_stamp(connection, schema)
        if schema is not None:
            _create_schema(connection, schema)
        sqlite = connection.dialect.name == "sqlite"
        prepared: Callable[[Connection], Any] = (
            sqlite_migration_connection if sqlite else nullcontext
        )
        with prepared(connection) as migrating:
            context.configure(connection=migrating, transaction_per_migration=not sqlite, **options)
            with context.begin_transaction():
                context.run_migrations()


def _refuse_foreign_stamp(connection: Connection, schema: str | None) -> None:
    """Refuse to run when our revisions are recorded in another version table.

    A host that mounted our scripts in its own Alembic tree records them in its
    version table; our stream would not see them and would create the tables again.
    """
    began = not connection.in_transaction()
    try:
        inspector = inspect(connection)
        names = inspector.get_table_names(schema=schema)
        if VERSION_TABLE in names:
            return
        for name in names:
            if "alembic_version" not in name:
                continue
            if "version_num" not in {col["name"] for col in inspector.get_columns(name, schema)}:
                continue
            version_table = table(name, column("version_num"), schema=schema)
            stamped = connection.execute(select(version_table.c.version_num)).scalars()
            ours = sorted(_known_revisions() & set(stamped))
            if ours:
                raise SchemaError(
                    f"agentledger's revision {ours[0]} is recorded in the table {name}, "
                    f"not in {VERSION_TABLE}: a host application's Alembic manages these "
                    "tables, and running agentledger's own stream as well would create "
                    "them twice",
                    current=ours[0],
                    hint="keep upgrading through the host's `alembic upgrade heads`",
                )
    finally:
        if began and connection.in_transaction():
            connection.rollback()


def _create_schema(connection: Connection, schema: str) -> None:
    began = not connection.in_transaction()
    # The name was validated as an identifier; quoting makes it exact.
    quoted = connection.dialect.identifier_preparer.quote_identifier(schema)
    connection.execute(text(f"CREATE SCHEMA IF NOT EXISTS {quoted}"))
    if began:
        connection.commit()
