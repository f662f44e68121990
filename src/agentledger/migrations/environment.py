"""The body of agentledger's env.py: configure Alembic and run the migrations.

Every entry point (the command API, ``agentledger db``, plain ``alembic`` from a
checkout) runs through ``run_environment``, so each takes the same database lock,
writes the same version table, refuses a database a host's Alembic already manages
and treats SQLite the same way.
"""

from __future__ import annotations

from typing import Any

from alembic.environment import EnvironmentContext
from sqlalchemy import Connection, text
from sqlalchemy.engine import URL

from ..engine import brief_transaction, resolve_url, validate_schema
from ..errors import SchemaError
from ..models import VERSION_TABLE
from .compare import comparison_options, quiet_about_text_indexes
from .locks import check_offline_sql, migration_lock, migration_run
from .scripts import SCHEMA_ATTRIBUTE
from .target import alembic_can_migrate, connected
from .version_table import locate


def run_environment(context: EnvironmentContext) -> None:
    """The body of agentledger's env.py: configure Alembic and run the migrations.

    The database is ``Config.attributes["connection"]`` (a Connection or an Engine),
    else ``-x url=...``, else ``AGENTLEDGER_DATABASE_URL`` (default
    ``sqlite:///agentledger.db``); the schema is the ``agentledger_schema`` attribute,
    else ``-x schema=...``.
    """
    config = context.config
    schema = config.attributes.get(SCHEMA_ATTRIBUTE)
    if schema is None:
        schema = context.get_x_argument(as_dictionary=True).get("schema")
    config.attributes[SCHEMA_ATTRIBUTE] = schema
    options = {**comparison_options(schema), "render_as_batch": True}
    if context.is_offline_mode():
        _run_offline(context, schema, options)
        return
    connectable = config.attributes.get("connection")
    if isinstance(connectable, Connection):
        _run_online(context, connectable, schema, options)
        return
    target = connectable if connectable is not None else _url_of(context)
    with connected(target) as connection:
        _run_online(context, connection, schema, options)


def _url_of(context: EnvironmentContext) -> URL:
    offline = context.config.attributes.get("offline_url")
    if offline is not None:
        return offline  # type: ignore[no-any-return]
    x_url = context.get_x_argument(as_dictionary=True).get("url")
    return resolve_url(x_url, asynchronous=False)


def _run_offline(context: EnvironmentContext, schema: str | None, options: dict[str, Any]) -> None:
    url = _url_of(context)
    check_offline_sql(url)
    validate_schema(schema, url.get_backend_name())
    alembic_can_migrate(url.get_dialect())
    context.configure(
        url=url,
        literal_binds=True,
        transaction_per_migration=True,
        dialect_opts={"paramstyle": "named"},
        **options,
    )
    # A script fetches nothing back: without this, the version table's INSERT asks for
    # its key by RETURNING, which on Oracle is RETURNING ... INTO a bind parameter no
    # SQL*Plus script can fill (the version is a literal_column, so SQLAlchemy fetches it).
    context.get_context().dialect.insert_returning = False
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
        with migration_run(connection) as run_options:
            context.configure(**run_options, **options)
            with context.begin_transaction(), quiet_about_text_indexes():
                context.run_migrations()


def _refuse_foreign_stamp(connection: Connection, schema: str | None) -> None:
    """Refuse to run when our revisions are recorded in another version table.

    A host that mounted our scripts in its own Alembic tree records them in its
    version table; our stream would not see them and would create the tables again.
    """
    at = locate(connection, schema)
    if at.table == VERSION_TABLE:
        return
    raise SchemaError(
        f"agentledger's revision {at.revision} is recorded in the table {at.table}, not in "
        f"{VERSION_TABLE}: a host application's Alembic manages these tables (single "
        "pipeline), and running agentledger's own stream as well would create them twice",
        current=at.revision,
        hint="upgrade through the host's `alembic upgrade heads`; or, to give agentledger "
        "its own stream, remove its versions (and depends_on) from the host's tree, "
        f"delete the row '{at.revision}' from {at.table}, then run "
        f"`agentledger db stamp {at.revision}`",
    )


def _create_schema(connection: Connection, schema: str) -> None:
    # The name was validated as an identifier; quoting makes it exact.
    quoted = connection.dialect.identifier_preparer.quote_identifier(schema)
    with brief_transaction(connection, commit=True):
        connection.execute(text(f"CREATE SCHEMA IF NOT EXISTS {quoted}"))
