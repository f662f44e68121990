"""``agentledger db ...``: upgrade, downgrade, history, current, check, sql and stamp, over
``agentledger.migrations``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import partial

from .. import migrations
from ..engine import is_sqlite, mask, resolve_url
from .common import (
    EXIT_OK,
    Groups,
    UsageError,
    add_commands,
    add_connection_options,
    connection_of,
    database_url,
    schema_of,
)
from .output import say


def add_db_group(groups: Groups) -> None:
    """Add ``db`` and its commands."""
    db = groups.add_parser(
        "db",
        help="create, upgrade and check agentledger's tables",
        description="Run agentledger's migrations (its own version table is "
        "agentledger_alembic_version; a host's alembic_version is never touched).",
    )
    db.set_defaults(group_parser=db)
    commands = add_commands(db)

    upgrade = commands.add_parser("upgrade", help="upgrade the tables (default: to head)")
    add_connection_options(upgrade)
    upgrade.add_argument("revision", nargs="?", default="head", help="target (default: head)")
    upgrade.set_defaults(handler=_upgrade)

    downgrade = commands.add_parser(
        "downgrade", help="downgrade the tables to REVISION ('base' drops them all)"
    )
    add_connection_options(downgrade)
    downgrade.add_argument("revision", help="target revision, 'base' or a relative '-1'")
    downgrade.set_defaults(handler=partial(_move, migrations.downgrade))

    history = commands.add_parser(
        "history",
        help="list the migrations this package ships, oldest first, with their deploy kind",
        description="EXPAND: safe to apply before the code that needs it is deployed. "
        "CONTRACT: apply only once every process runs code that no longer needs what "
        "it removes.",
    )
    history.set_defaults(handler=_history)

    current = commands.add_parser("current", help="print the revision the database is at")
    add_connection_options(current)
    current.set_defaults(handler=_current)

    check = commands.add_parser(
        "check", help="exit 0 when the database is at head, 3 when missing or behind"
    )
    add_connection_options(check)
    check.set_defaults(handler=_check)

    sql = commands.add_parser(
        "sql",
        help="print the upgrade as SQL (PostgreSQL and MySQL/MariaDB; not SQLite)",
        description="Render the upgrade as SQL without connecting: the URL only names "
        "the dialect, so --url postgresql:// or --url mysql:// is enough.",
    )
    add_connection_options(sql)
    sql.add_argument("--from", dest="from_revision", metavar="REV", help="start after REV")
    sql.add_argument("revision", nargs="?", default="head", help="target (default: head)")
    sql.set_defaults(handler=_sql)

    stamp = commands.add_parser(
        "stamp",
        help="adopt tables made without migrations (create_all): record REVISION",
        description="Check that agentledger's tables have REVISION's shape, then record "
        "it in agentledger_alembic_version without running any migration. Each "
        "difference is named when they do not match (exit 3).",
    )
    add_connection_options(stamp)
    stamp.add_argument("revision", nargs="?", default="head", help="target (default: head)")
    stamp.set_defaults(handler=partial(_move, migrations.stamp))


def _move(move: Callable[..., None], args: argparse.Namespace) -> int:
    """Take the tables to REVISION with ``move`` (``migrations.upgrade``, ``downgrade``
    or ``stamp``), then say where they are."""
    url, schema = _lasting(*connection_of(args))
    move(url, args.revision, schema=schema)
    _say_where(url, schema, migrations.current(url, schema=schema))
    return EXIT_OK


def _upgrade(args: argparse.Namespace) -> int:
    """Upgrade, then say which revisions were applied and where the tables are."""
    url, schema = _lasting(*connection_of(args))
    applied = migrations.upgrade(url, args.revision, schema=schema)
    say(f"applied {', '.join(applied)}" if applied else "nothing to apply")
    _say_where(url, schema, migrations.current(url, schema=schema))
    return EXIT_OK


def _history(args: argparse.Namespace) -> int:
    head = migrations.head()
    for each in migrations.history():
        mark = " (head)" if each.revision == head else ""
        say(f"{each.revision}{mark}  {each.deploy}  {each.title}")
        if each.note:
            say(f"    {each.note}")
    return EXIT_OK


def _current(args: argparse.Namespace) -> int:
    url, schema = _lasting(*connection_of(args))
    say(_describe(migrations.current(url, schema=schema)))
    return EXIT_OK


def _check(args: argparse.Namespace) -> int:
    url, schema = _lasting(*connection_of(args))
    migrations.check(url, schema=schema)
    _say_where(url, schema, migrations.head())
    return EXIT_OK


def _lasting(url: str, schema: str | None) -> tuple[str, str | None]:
    """The URL and schema, unless the URL names a private in-memory SQLite database:
    it is gone when the command ends, so migrating or checking it tells nothing."""
    if is_sqlite(url) and resolve_url(url, asynchronous=False).database in (None, "", ":memory:"):
        raise UsageError(
            f"{mask(url)} is a private in-memory database, gone when this command ends; "
            "name a file: --url sqlite:///path/to/agentledger.db"
        )
    return url, schema


def _sql(args: argparse.Namespace) -> int:
    url = database_url(args)
    if is_sqlite(url):
        raise UsageError(
            f"{migrations.SQLITE_OFFLINE_REFUSAL}; run `agentledger db upgrade` against "
            "the database, or pass --url postgresql:// or --url mysql://"
        )
    schema = schema_of(args, url)
    sys.stdout.write(
        migrations.sql(url, args.revision, from_revision=args.from_revision, schema=schema)
    )
    return EXIT_OK


def _say_where(url: str, schema: str | None, revision: str | None) -> None:
    """``<url> [schema S] is at <revision>``, the password masked."""
    where = mask(url) + (f" schema {schema}" if schema else "")
    say(f"{where} is at {_describe(revision)}")


def _describe(revision: str | None) -> str:
    head = migrations.head()
    if revision is None:
        return f"base: agentledger's tables are absent (head is {head})"
    if revision == head:
        return f"{revision} (head)"
    return f"{revision} (head is {head})"
