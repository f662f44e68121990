"""The revision a database records: in agentledger's version table, or in a host's.

A host application that mounts our revisions in its own Alembic tree (single
pipeline) records them in its version table; agentledger's own stream records them
in ``agentledger_alembic_version``. Every command reads both, so the two are never
mixed on one database.
"""

from __future__ import annotations

from typing import NamedTuple

from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, column, inspect, select, table

from ..engine import brief_transaction, takes_schema, validate_schema
from ..errors import SchemaError
from ..models import VERSION_TABLE
from .scripts import revision_order


class Location(NamedTuple):
    """Where a database records its agentledger revision."""

    revision: str | None
    """The revision, or None when agentledger's tables are absent."""
    table: str
    """The version table it is recorded in (ours, unless a host's Alembic manages it)."""


class _Stamp(NamedTuple):
    table: str
    revision: str


def own_revision(connection: Connection, schema: str | None = None) -> str | None:
    """The revision recorded in agentledger's own version table, or None."""
    with brief_transaction(connection):
        return _own_revision(connection, schema)


def locate(connection: Connection, schema: str | None) -> Location:
    """The revision the database is at, and the version table that records it.

    Raises:
        SchemaError: the schema option on a database a host's Alembic manages.
    """
    validate_schema(schema, connection.dialect.name)
    with brief_transaction(connection):
        own = _own_revision(connection, schema)
        if own is not None:
            return Location(own, VERSION_TABLE)
        foreign = _foreign_stamps(connection, schema)
    if not foreign:
        return Location(None, VERSION_TABLE)
    if schema is not None:
        raise SchemaError(
            "the PostgreSQL schema option is not available when a host application's "
            f"Alembic manages agentledger's tables (single pipeline: {foreign[0].revision} "
            f"is recorded in {foreign[0].table}): the host's run creates them in the "
            "default schema",
            current=foreign[0].revision,
            hint="drop the schema option (schema=None, no --schema)",
        )
    return Location(foreign[0].revision, foreign[0].table)


def schemas_holding(connection: Connection) -> list[str]:
    """The schemas other than the connection's default that hold agentledger's version
    table (where a caller who forgot the schema option finds its tables); none on a
    database without schemas of their own (``takes_schema``)."""
    if not takes_schema(connection.dialect.name):
        return []
    with brief_transaction(connection):
        inspector = inspect(connection)
        default = inspector.default_schema_name
        return [
            name
            for name in inspector.get_schema_names()
            if name != default and inspector.has_table(VERSION_TABLE, schema=name)
        ]


def _own_revision(connection: Connection, schema: str | None) -> str | None:
    context = MigrationContext.configure(
        connection,
        opts={"version_table": VERSION_TABLE, "version_table_schema": schema},
    )
    return context.get_current_revision()


def _foreign_stamps(connection: Connection, schema: str | None) -> list[_Stamp]:
    """Our revisions recorded in a version table other than ours, newest first.

    Looks in ``schema`` and in the default schema, where a host's version table is.
    """
    inspector = inspect(connection)
    order = revision_order()
    found: list[_Stamp] = []
    for where in dict.fromkeys((schema, None)):
        for name in inspector.get_table_names(schema=where):
            if name == VERSION_TABLE or "alembic_version" not in name:
                continue
            if "version_num" not in {col["name"] for col in inspector.get_columns(name, where)}:
                continue
            version_table = table(name, column("version_num"), schema=where)
            stamped = connection.execute(select(version_table.c.version_num)).scalars()
            found.extend(_Stamp(name, rev) for rev in set(stamped) if rev in order)
    return sorted(found, key=lambda stamp: order.index(stamp.revision), reverse=True)
