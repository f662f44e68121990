"""The commands: upgrade, downgrade, current, check, sql and stamp, as ``agentledger db`` runs them.

Each takes a ``Target`` (a URL, an Engine or a Connection) and raises only
agentledger's errors. From async code, hand a sync connection over with
``run_sync``::

    async with engine.connect() as connection:
        await connection.run_sync(agentledger.migrations.upgrade)
"""

from __future__ import annotations

import io
import logging
import threading

from alembic import command
from sqlalchemy import Connection, inspect
from sqlalchemy.engine import URL

from ..engine import mask, resolve_url
from ..environment import SCHEMA
from ..errors import SchemaError
from ..models import VERSION_TABLE, metadata
from .compare import Difference, differences, shape_problems
from .scripts import alembic_config, head, is_known, resolve_revision, revision_order
from .target import Target, connected, missing_file, reported, url_of
from .version_table import locate, schemas_holding

# Alembic's `context` is process-global: two threads running commands at once would
# share it. Database-level locks (see locks.migration_lock) serialise processes.
_process_lock = threading.RLock()
_SESSIONS = "agentledger_sessions"
logger = logging.getLogger("agentledger.migrations")


def upgrade(
    target: Target, revision: str = "head", *, schema: str | None = None
) -> tuple[str, ...]:
    """Upgrade agentledger's tables to ``revision``; a no-op when already there. The
    revisions it applied, oldest first (logged on ``agentledger.migrations``)."""
    with connected(target) as connection, _process_lock:
        before = locate(connection, schema).revision
        command.upgrade(alembic_config(schema=schema, connection=connection), revision)
        after = locate(connection, schema).revision
    applied = _between(before, after)
    for each in applied:
        logger.info("applied migration %s to %s", each, mask(url_of(target)))
    if not applied:
        logger.info("%s is at %s: nothing to apply", mask(url_of(target)), after)
    return applied


def _between(before: str | None, after: str | None) -> tuple[str, ...]:
    """The shipped revisions after ``before`` up to ``after``, oldest first."""
    order = revision_order()
    if after is None or after not in order:
        return ()
    start = order.index(before) + 1 if before in order else 0
    return order[start : order.index(after) + 1]


def downgrade(target: Target, revision: str, *, schema: str | None = None) -> None:
    """Downgrade agentledger's tables to ``revision`` (``base`` drops them all)."""
    with connected(target) as connection, _process_lock:
        command.downgrade(alembic_config(schema=schema, connection=connection), revision)


def current(target: Target, *, schema: str | None = None) -> str | None:
    """The revision the database is at, or None when agentledger's tables are absent.

    When a host's Alembic manages our tables (single pipeline), the revision comes
    from the host's version table.
    """
    if missing_file(target) is not None:
        return None  # and no file is created
    with connected(target) as connection:
        return locate(connection, schema).revision


def upgrade_hint(url: str | URL | None = None, *, schema: str | None = None) -> str:
    """The command that brings a database's agentledger tables to head."""
    return _db_command("upgrade", url, schema)


def _db_command(verb: str, url: str | URL | None, schema: str | None) -> str:
    parts = [f"agentledger db {verb}"]
    if url is not None:
        parts.append(f"--url '{mask(url)}'")
    if schema:
        parts.append(f"--schema {schema}")
    return " ".join(parts)


def check(target: Target, *, schema: str | None = None) -> None:
    """Raise SchemaError unless the database is at this package's head revision.

    The message names the revision the database is at, the one it needs and the
    revisions in between; the hint is the command that upgrades it.
    """
    expected = head()
    missing = missing_file(target)
    if missing is not None:  # connecting would create it
        raise SchemaError(
            f"agentledger's tables are missing: there is no SQLite database file at "
            f"{missing} (it needs revision {expected})",
            head=expected,
            hint=upgrade_hint(url_of(target), schema=schema),
        )
    with connected(target) as connection:
        at, where = locate(connection, schema)
        made_without_migrations = at is None and inspect(connection).has_table(
            _SESSIONS, schema=schema
        )
        elsewhere = schemas_holding(connection) if at is None and schema is None else []
    if at == expected:
        return
    if made_without_migrations:
        raise SchemaError(
            "agentledger's tables are here but no revision is recorded (made with "
            "metadata.create_all?): `db upgrade` would try to create them again",
            head=expected,
            hint=f"{_db_command('stamp', url_of(target), schema)} checks their shape and "
            "records the revision",
        )
    if elsewhere:
        raise SchemaError(
            "agentledger's tables are missing from this database's default schema, and "
            f"PostgreSQL schema {', '.join(elsewhere)} holds them",
            head=expected,
            hint=f'pass --schema {elsewhere[0]} (in code: schema="{elsewhere[0]}"; or set '
            f"{SCHEMA.name}={elsewhere[0]}); `db upgrade` without it would make a second, "
            "empty set of tables in the default schema",
        )
    if where != VERSION_TABLE:
        hint = f"run the host application's `alembic upgrade heads` (it records {at} in {where})"
    else:
        hint = upgrade_hint(url_of(target), schema=schema)
    if at is None:
        raise SchemaError(
            f"agentledger's tables are missing from this database (it needs revision {expected})",
            head=expected,
            hint=hint,
        )
    if not is_known(at):
        raise SchemaError(
            f"the database is at agentledger revision {at}, newer than this package knows "
            f"(head {expected})",
            current=at,
            head=expected,
            hint="upgrade the agentledger package",
        )
    order = revision_order()
    pending = order[order.index(at) + 1 :]
    raise SchemaError(
        f"the database is at agentledger revision {at}, behind this package's {expected} "
        f"(to apply: {', '.join(pending)})",
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
    buffer = io.StringIO()
    config = alembic_config(schema=schema, output_buffer=buffer)
    config.attributes["offline_url"] = resolved
    span = f"{from_revision}:{revision}" if from_revision else revision
    with reported(resolved), _process_lock:
        command.upgrade(config, span, sql=True)
    return buffer.getvalue()


def stamp(target: Target, revision: str = "head", *, schema: str | None = None) -> None:
    """Adopt tables made without migrations (``metadata.create_all``): record
    ``revision`` in agentledger's version table, after checking that the tables have
    that revision's shape.

    Raises:
        SchemaError: the tables differ from the revision (each difference is named),
            or the database is already managed by migrations at another revision.
        ValidationError: an unknown revision.
    """
    wanted = resolve_revision(revision)
    with connected(target) as connection, _process_lock:
        at = locate(connection, schema)
        if at.revision == wanted and at.table == VERSION_TABLE:
            return
        if at.revision is not None:
            raise SchemaError(
                f"the database is already at agentledger revision {at.revision} "
                f"(recorded in {at.table}): stamping is only for tables made without "
                "migrations",
                current=at.revision,
                hint="agentledger db upgrade" if at.table == VERSION_TABLE else None,
            )
        actual = differences(connection, schema)
        problems = shape_problems(actual, wanted)
        if problems:
            raise SchemaError(
                f"agentledger's tables do not match revision {wanted}, so it was not "
                f"stamped: {'; '.join(problems)}",
                head=wanted,
                hint=_stamp_hint(connection, actual, schema, url_of(target)),
            )
        command.stamp(alembic_config(schema=schema, connection=connection), wanted)


def _stamp_hint(
    connection: Connection, actual: list[Difference], schema: str | None, url: str | URL
) -> str:
    for revision in reversed(revision_order()):
        if not shape_problems(actual, revision):
            stamp_it = _db_command(f"stamp {revision}", url, schema)
            return f"they match revision {revision}: {stamp_it}"
    if not set(inspect(connection).get_table_names(schema=schema)) & set(metadata.tables):
        return upgrade_hint(url, schema=schema)
    return "make the tables match (or recreate them with `agentledger db upgrade`)"
