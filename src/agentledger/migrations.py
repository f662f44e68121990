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

Host applications: ``exclude_agentledger_names`` / ``exclude_agentledger_objects``
keep a host's autogenerate off our tables (separate stream, the default);
``check_host_config`` guards a host that mounts our versions in its own tree
(single pipeline); ``stamp`` adopts tables made without migrations (create_all).
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple, TextIO, TypeAlias

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.environment import EnvironmentContext
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from alembic.util.pyfiles import coerce_resource_to_filename
from sqlalchemy import (
    Connection,
    Engine,
    MetaData,
    column,
    create_engine,
    inspect,
    select,
    table,
    text,
)
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


def versions_location() -> Path:
    """The folder of agentledger's revision scripts, for a host's ``version_locations``.

    From a wheel it is also reachable as the package resource
    ``agentledger:_migrations/versions``; an editable install has only this path.
    """
    return script_location() / "versions"


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
    """The revision the database is at, or None when agentledger's tables are absent.

    When a host's Alembic manages our tables (single pipeline), the revision comes
    from the host's version table.
    """
    with _translated(target), _connected(target) as connection:
        return _locate(connection, schema).revision


class _Location(NamedTuple):
    revision: str | None
    table: str  # the version table the revision is recorded in


def _locate(connection: Connection, schema: str | None) -> _Location:
    validate_schema(schema, connection.dialect.name)
    began = not connection.in_transaction()
    try:
        context = MigrationContext.configure(
            connection,
            opts={"version_table": VERSION_TABLE, "version_table_schema": schema},
        )
        own = context.get_current_revision()
        if own is not None:
            return _Location(own, VERSION_TABLE)
        foreign = _foreign_stamps(connection, schema)
        if not foreign:
            return _Location(None, VERSION_TABLE)
        if schema is not None:
            raise _schema_with_host_pipeline(foreign[0])
        return _Location(foreign[0].revision, foreign[0].table)
    finally:
        if began and connection.in_transaction():
            connection.rollback()


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
    with _translated(target), _connected(target) as connection:
        at, where = _locate(connection, schema)
    expected = head()
    if at == expected:
        return
    if where != VERSION_TABLE:
        hint = f"run the host application's `alembic upgrade heads` (it records {at} in {where})"
    else:
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
    order = _revision_order()
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


def stamp(target: Target, revision: str = "head", *, schema: str | None = None) -> None:
    """Adopt tables made without migrations (``metadata.create_all``): record
    ``revision`` in agentledger's version table, after checking that the tables have
    that revision's shape.

    Raises:
        SchemaError: the tables differ from the revision (each difference is named),
            or the database is already managed by migrations at another revision.
        ValidationError: an unknown revision.
    """
    wanted = _resolve_revision(revision)
    with _translated(target), _connected(target) as connection, _process_lock:
        at = _locate(connection, schema)
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
        actual = _differences(connection, schema)
        problems = _shape_problems(actual, wanted)
        if problems:
            raise SchemaError(
                f"agentledger's tables do not match revision {wanted}, so it was not "
                f"stamped: {'; '.join(problems)}",
                head=wanted,
                hint=_stamp_hint(connection, actual, schema, _url_of_target(target)),
            )
        config = alembic_config(schema=schema)
        config.attributes["connection"] = connection
        command.stamp(config, wanted)


def _resolve_revision(revision: str) -> str:
    if revision in ("head", "heads"):
        return head()
    if revision not in _known_revisions():
        raise ValidationError(
            f"unknown agentledger revision {revision!r}; known: {', '.join(_revision_order())}",
            path="revision",
        )
    return revision


def _stamp_hint(
    connection: Connection, actual: list[_Difference], schema: str | None, url: str | URL
) -> str:
    for revision in reversed(_revision_order()):
        if not _shape_problems(actual, revision):
            command_ = _db_command(f"stamp {revision}", url, schema)
            return f"they match revision {revision}: {command_}"
    if not set(inspect(connection).get_table_names(schema=schema)) & set(metadata.tables):
        return upgrade_hint(url, schema=schema)
    return "make the tables match (or recreate them with `agentledger db upgrade`)"


class _Difference(NamedTuple):
    key: tuple[str, ...]
    text: str
    absent_text: str  # how to say it when the revision has it and the database does not


def _shape_problems(differences: list[_Difference], revision: str) -> list[str]:
    """How tables with these ``differences`` from the models differ from ``revision``.

    A private SQLite database migrated to ``revision`` is compared with the models
    too; the tables have the revision's shape when both differ from the models in
    the same way.
    """
    actual = {d.key: d for d in differences}
    expected = _expected_differences(revision)
    problems = [d.text for key, d in actual.items() if key not in expected]
    problems += [
        d.absent_text.format(revision=revision) for key, d in expected.items() if key not in actual
    ]
    return problems


@cache
def _expected_differences(revision: str) -> dict[tuple[str, ...], _Difference]:
    if revision == head():
        return {}
    engine = create_engine("sqlite://", poolclass=NullPool)
    try:
        with engine.connect() as connection:
            config = alembic_config()
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
            return {d.key: d for d in _differences(connection, None)}
    finally:
        engine.dispose()


def _differences(connection: Connection, schema: str | None) -> list[_Difference]:
    began = not connection.in_transaction()
    include = include_agentledger_names if schema is None else _include_names_in(schema)
    target = _target_metadata(schema)
    try:
        context = MigrationContext.configure(
            connection,
            opts={
                "compare_type": True,
                "include_name": include,
                "include_schemas": schema is not None,
                "version_table": VERSION_TABLE,
                "version_table_schema": schema,
                "target_metadata": target,
            },
        )
        diffs = compare_metadata(context, target)
    finally:
        if began and connection.in_transaction():
            connection.rollback()
    flat: list[Any] = []
    for diff in diffs:
        flat.extend(diff if isinstance(diff, list) else [diff])
    return [_described(diff) for diff in flat]


def _described(diff: Sequence[Any]) -> _Difference:
    kind = diff[0]
    if kind in ("add_table", "remove_table"):
        subject, what = f"table {diff[1].name}", "table"
    elif kind in ("add_column", "remove_column"):
        subject, what = f"column {diff[2]}.{diff[3].name}", "column"
    elif kind in ("add_index", "remove_index", "add_constraint", "remove_constraint"):
        item = diff[1]
        what = "index" if "index" in kind else "constraint"
        subject = f"{what} {item.name} on {item.table.name}"
    elif kind in ("add_fk", "remove_fk"):
        subject, what = f"foreign key {diff[1].name} on {diff[1].parent.name}", "foreign key"
    elif kind.startswith("modify_"):
        attribute = kind.removeprefix("modify_")
        subject = f"column {diff[2]}.{diff[3]}"
        text = f"{subject} has {attribute} {diff[5]!s}, expected {diff[6]!s}"
        return _Difference(
            (kind, diff[2], diff[3]), text, f"{subject} differs from revision {{revision}}"
        )
    else:
        return _Difference((kind, repr(diff)), f"{kind}: {diff!r}", f"{kind} at {{revision}}")
    if kind.startswith("add_"):
        return _Difference(
            (what, subject),
            f"{subject} is missing",
            f"{subject} exists, but revision {{revision}} does not have it",
        )
    return _Difference(
        (what, subject),
        f"{subject} is not part of agentledger",
        f"{subject} is missing (revision {{revision}} has it)",
    )


def include_agentledger_names(name: str | None, type_: str, _parents: Any) -> bool:
    """Autogenerate filter of agentledger's own environment: only our tables."""
    if type_ == "table":
        return name is not None and name.startswith(TABLE_PREFIX)
    return True


def exclude_agentledger_names(name: str | None, type_: str, parents: Any) -> bool:
    """``include_name`` filter for a host application's env.py: everything but ours.

    With it the host's ``alembic revision --autogenerate`` (and ``alembic check``)
    never reflects agentledger's tables, their indexes or its version table, so it
    never proposes to drop or alter them. Combine it with a filter of your own by
    calling it from yours.
    """
    if type_ == "table":
        return not _ours(name)
    return not _ours(parents.get("table_name") if isinstance(parents, dict) else None)


def exclude_agentledger_objects(
    object_: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """``include_object`` filter for a host's env.py: everything but ours.

    Needed besides ``exclude_agentledger_names`` only when agentledger's tables are in
    the host's ``target_metadata`` (for foreign keys, say): then the host's
    autogenerate would otherwise propose to create them.
    """
    if type_ == "table":
        return not _ours(name)
    parent = getattr(object_, "table", None)
    return not _ours(getattr(parent, "name", None))


def _ours(name: str | None) -> bool:
    return name is not None and name.startswith(TABLE_PREFIX)


def check_host_config(config: Config, connection: Connection | None = None) -> None:
    """Refuse a host's Alembic setup that mounts agentledger's versions but would break.

    For the single pipeline: call it from the host's env.py with ``context.config``
    (and, online, the connection). Raises SchemaError when the host's
    ``version_locations`` does not reach this package's revisions (``path_separator =
    os`` silently drops ``agentledger:_migrations/versions``), when the PostgreSQL
    schema option is asked for (not available in this mode), or when agentledger's own
    stream already manages the database (the two modes must not be mixed).
    """
    if config.attributes.get(SCHEMA_ATTRIBUTE) is not None:
        raise SchemaError(
            "the PostgreSQL schema option is not available when a host's Alembic runs "
            "agentledger's revisions (single pipeline): they create the tables in the "
            "default schema",
            hint="remove the agentledger_schema attribute, or run agentledger's own "
            "stream instead: agentledger db upgrade --schema NAME",
        )
    problem = _mount_problem(config)
    if problem is not None:
        raise SchemaError(
            problem,
            hint="in the host's alembic.ini set `path_separator = space` and list "
            "`agentledger:_migrations/versions` (from an editable install: "
            f"{versions_location()}) in version_locations",
        )
    if connection is not None:
        _refuse_own_stream(connection)


def _mount_problem(config: Config) -> str | None:
    """Why the host's version_locations misses this package's revisions, or None."""
    ours = versions_location().resolve()
    for entry in config.get_version_locations_list() or []:
        try:
            if coerce_resource_to_filename(entry).resolve() == ours:
                return None
        except (ImportError, OSError, TypeError):
            continue
    raw = config.file_config.get(config.config_ini_section, "version_locations", fallback="")
    separator = config.get_main_option("path_separator") or ""
    resource = "agentledger:_migrations/versions"
    if "agentledger:" in raw and (separator == ":" or (separator == "os" and os.pathsep == ":")):
        return (
            f"the host's version_locations names {resource}, but `path_separator = "
            f"{separator}` splits it at ':' and Alembic silently finds none of "
            "agentledger's revisions"
        )
    if "agentledger:" in raw:
        return (
            f"{resource} does not exist in this installation (an editable install keeps "
            f"the scripts in the source tree, at {versions_location()})"
        )
    return "the host's version_locations does not include agentledger's revisions"


def _refuse_own_stream(connection: Connection) -> None:
    began = not connection.in_transaction()
    try:
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        own = context.get_current_revision()
    finally:
        if began and connection.in_transaction():
            connection.rollback()
    if own is not None:
        raise SchemaError(
            f"agentledger's own stream manages this database ({VERSION_TABLE} is at "
            f"{own}): running its revisions from the host's tree too would create the "
            "tables twice",
            current=own,
            hint="keep the separate stream (remove agentledger's versions from the host's "
            "version_locations and run `agentledger db upgrade`), or move to the single "
            f"pipeline: drop the table {VERSION_TABLE}, then `alembic stamp {own}`",
        )


@cache
def _revision_order() -> tuple[str, ...]:
    """Our revisions, oldest first."""
    script = ScriptDirectory.from_config(alembic_config())
    return tuple(reversed([rev.revision for rev in script.walk_revisions()]))


@cache
def _known_revisions() -> frozenset[str]:
    return frozenset(_revision_order())


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


class _Stamp(NamedTuple):
    table: str
    revision: str


def _foreign_stamps(connection: Connection, schema: str | None) -> list[_Stamp]:
    """Our revisions recorded in a version table other than ours, newest first.

    Looks in ``schema`` and in the default schema, where a host's version table is.
    """
    inspector = inspect(connection)
    order = _revision_order()
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


def _schema_with_host_pipeline(stamp: _Stamp) -> SchemaError:
    return SchemaError(
        "the PostgreSQL schema option is not available when a host application's "
        f"Alembic manages agentledger's tables (single pipeline: {stamp.revision} is "
        f"recorded in {stamp.table}): the host's run creates them in the default schema",
        current=stamp.revision,
        hint="drop the schema option (schema=None, no --schema)",
    )


def _refuse_foreign_stamp(connection: Connection, schema: str | None) -> None:
    """Refuse to run when our revisions are recorded in another version table.

    A host that mounted our scripts in its own Alembic tree records them in its
    version table; our stream would not see them and would create the tables again.
    """
    began = not connection.in_transaction()
    try:
        context = MigrationContext.configure(
            connection,
            opts={"version_table": VERSION_TABLE, "version_table_schema": schema},
        )
        if context.get_current_revision() is not None:
            return
        foreign = _foreign_stamps(connection, schema)
    finally:
        if began and connection.in_transaction():
            connection.rollback()
    if not foreign:
        return
    if schema is not None:
        raise _schema_with_host_pipeline(foreign[0])
    rev, name = foreign[0].revision, foreign[0].table
    raise SchemaError(
        f"agentledger's revision {rev} is recorded in the table {name}, not in "
        f"{VERSION_TABLE}: a host application's Alembic manages these tables (single "
        "pipeline), and running agentledger's own stream as well would create them twice",
        current=rev,
        hint="upgrade through the host's `alembic upgrade heads`; or, to give agentledger "
        "its own stream, remove its versions (and depends_on) from the host's tree, "
        f"delete the row '{rev}' from {name}, then run `agentledger db stamp {rev}`",
    )


def _create_schema(connection: Connection, schema: str) -> None:
    began = not connection.in_transaction()
    # The name was validated as an identifier; quoting makes it exact.
    quoted = connection.dialect.identifier_preparer.quote_identifier(schema)
    connection.execute(text(f"CREATE SCHEMA IF NOT EXISTS {quoted}"))
    if began:
        connection.commit()
