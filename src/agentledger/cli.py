"""The ``agentledger`` command line.

Commands come in groups (``agentledger db ...``); a later group (``sessions``,
``export``) is one more ``_add_*`` function in ``_GROUPS``. Every handler returns an
exit code; errors are one line on stderr, never a traceback, never a password.

Exit codes:
    0  success (``db check``: the database is at head)
    1  any other agentledger error (a database error, a lock not granted in time)
    2  usage: bad arguments, an invalid URL, revision or schema name, or an option
       the database does not support (``db sql`` on SQLite, ``--schema`` off PostgreSQL)
    3  the schema is not at this package's head: missing, behind or ahead (also: no
       SQLite file at the URL's path, which is never created by a read)
    4  the database cannot be reached
    5  ``import`` or ``copy`` finished, but some rows are stored with other values; they
       were kept as they were and are listed on stderr
    130 interrupted
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import NoReturn

from . import migrations
from .engine import DEFAULT_URL, URL_ENV, mask, resolve_url, validate_schema
from .errors import (
    AgentLedgerError,
    DatabaseUnavailableError,
    InvalidIdError,
    SchemaError,
    ValidationError,
)

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_SCHEMA = 3
EXIT_UNAVAILABLE = 4
EXIT_CONFLICTS = 5
EXIT_INTERRUPTED = 130

PROG = "agentledger"
UNREACHABLE_HINT = (
    f"check that the database server is running and that the URL (--url or ${URL_ENV}) "
    "names the right host, port and database"
)

Handler = Callable[[argparse.Namespace], int]


class _Usage(Exception):
    """A request the database cannot serve, reported like a usage error (exit 2)."""


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and argparse's own usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        (getattr(args, "group_parser", None) or parser).print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return handler(args)
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `agentledger db sql | head`: the reader left; not our error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_ERROR
    except _Usage as exc:
        _error(str(exc))
        return EXIT_USAGE
    except (ValidationError, InvalidIdError) as exc:
        _error(_one_line(exc))
        return EXIT_USAGE
    except DatabaseUnavailableError as exc:
        _error(f"{_one_line(exc)}; to fix: {UNREACHABLE_HINT}")
        return EXIT_UNAVAILABLE
    except SchemaError as exc:
        _error(_one_line(exc))
        return EXIT_SCHEMA if exc.head is not None else EXIT_ERROR
    except AgentLedgerError as exc:
        _error(_one_line(exc))
        return EXIT_ERROR


# --- parser ---------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _parser() -> _Parser:
    parser = _Parser(
        prog=PROG,
        description="agentledger: the durable memory of AI-agent harnesses.",
        epilog="exit codes: 0 ok, 1 error, 2 usage, 3 schema not at head, 4 database "
        "unreachable, 5 import/copy left conflicting rows as they were",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    groups = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=_Parser)
    for add_group in _GROUPS:
        add_group(groups)
    return parser


def _version() -> str:
    try:
        return version("agentledger")
    except PackageNotFoundError:
        return "unknown"


def _add_connection_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        help=f"database URL (default: ${URL_ENV}, else {DEFAULT_URL})",
    )
    parser.add_argument(
        "--schema",
        metavar="NAME",
        help="PostgreSQL schema holding agentledger's tables (PostgreSQL only)",
    )


def _add_db_group(groups: argparse._SubParsersAction[_Parser]) -> None:
    db = groups.add_parser(
        "db",
        help="create, upgrade and check agentledger's tables",
        description="Run agentledger's migrations (its own version table is "
        "agentledger_alembic_version; a host's alembic_version is never touched).",
    )
    db.set_defaults(group_parser=db)
    commands = db.add_subparsers(title="commands", metavar="COMMAND", parser_class=_Parser)

    upgrade = commands.add_parser("upgrade", help="upgrade the tables (default: to head)")
    _add_connection_options(upgrade)
    upgrade.add_argument("revision", nargs="?", default="head", help="target (default: head)")
    upgrade.set_defaults(handler=_db_upgrade)

    downgrade = commands.add_parser(
        "downgrade", help="downgrade the tables to REVISION ('base' drops them all)"
    )
    _add_connection_options(downgrade)
    downgrade.add_argument("revision", help="target revision, 'base' or a relative '-1'")
    downgrade.set_defaults(handler=_db_downgrade)

    current = commands.add_parser("current", help="print the revision the database is at")
    _add_connection_options(current)
    current.set_defaults(handler=_db_current)

    check = commands.add_parser(
        "check", help="exit 0 when the database is at head, 3 when missing or behind"
    )
    _add_connection_options(check)
    check.set_defaults(handler=_db_check)

    sql = commands.add_parser(
        "sql",
        help="print the upgrade as SQL (PostgreSQL and MySQL/MariaDB; not SQLite)",
        description="Render the upgrade as SQL without connecting: the URL only names "
        "the dialect, so --url postgresql:// or --url mysql:// is enough.",
    )
    _add_connection_options(sql)
    sql.add_argument("--from", dest="from_revision", metavar="REV", help="start after REV")
    sql.add_argument("revision", nargs="?", default="head", help="target (default: head)")
    sql.set_defaults(handler=_db_sql)

    stamp = commands.add_parser(
        "stamp",
        help="adopt tables made without migrations (create_all): record REVISION",
        description="Check that agentledger's tables have REVISION's shape, then record "
        "it in agentledger_alembic_version without running any migration. Each "
        "difference is named when they do not match (exit 3).",
    )
    _add_connection_options(stamp)
    stamp.add_argument("revision", nargs="?", default="head", help="target (default: head)")
    stamp.set_defaults(handler=_db_stamp)


def _add_operation_groups(groups: argparse._SubParsersAction[_Parser]) -> None:
    from ._cli_ops import add_groups  # sessions, export, import, copy, purge

    add_groups(groups)


_GROUPS: tuple[Callable[[argparse._SubParsersAction[_Parser]], None], ...] = (
    _add_db_group,
    _add_operation_groups,
)


# --- db handlers ----------------------------------------------------------------------


def _db_upgrade(args: argparse.Namespace) -> int:
    url = _url(args)
    schema = _schema(args, url)
    migrations.upgrade(url, args.revision, schema=schema)
    at = migrations.current(url, schema=schema)
    _say(f"{_where(url, schema)} is at {_describe(at)}")
    return EXIT_OK


def _db_downgrade(args: argparse.Namespace) -> int:
    url = _url(args)
    schema = _schema(args, url)
    migrations.downgrade(url, args.revision, schema=schema)
    at = migrations.current(url, schema=schema)
    _say(f"{_where(url, schema)} is at {_describe(at)}")
    return EXIT_OK


def _db_current(args: argparse.Namespace) -> int:
    url = _url(args)
    at = migrations.current(url, schema=_schema(args, url))
    _say(_describe(at))
    return EXIT_OK


def _db_check(args: argparse.Namespace) -> int:
    url = _url(args)
    schema = _schema(args, url)
    migrations.check(url, schema=schema)
    _say(f"{_where(url, schema)} is at {_describe(migrations.head())}")
    return EXIT_OK


def _db_stamp(args: argparse.Namespace) -> int:
    url = _url(args)
    schema = _schema(args, url)
    migrations.stamp(url, args.revision, schema=schema)
    _say(f"{_where(url, schema)} is at {_describe(migrations.current(url, schema=schema))}")
    return EXIT_OK


def _db_sql(args: argparse.Namespace) -> int:
    url = _url(args)
    if resolve_url(url, asynchronous=False).get_backend_name() == "sqlite":
        raise _Usage(
            f"{migrations.SQLITE_OFFLINE_REFUSAL}; run `agentledger db upgrade` against "
            "the database, or pass --url postgresql:// or --url mysql://"
        )
    schema = _schema(args, url)
    sys.stdout.write(
        migrations.sql(url, args.revision, from_revision=args.from_revision, schema=schema)
    )
    return EXIT_OK


# --- helpers --------------------------------------------------------------------------


def _url(args: argparse.Namespace) -> str:
    """--url, else $AGENTLEDGER_DATABASE_URL, else the local SQLite file."""
    url: str = args.url or os.environ.get(URL_ENV) or DEFAULT_URL
    resolve_url(url, asynchronous=False)  # an unusable URL is a usage error, before any I/O
    return url


def _schema(args: argparse.Namespace, url: str) -> str | None:
    schema: str | None = args.schema
    if schema is None:
        return None
    try:
        return validate_schema(schema, resolve_url(url, asynchronous=False).get_backend_name())
    except SchemaError as exc:
        raise _Usage(_one_line(exc)) from exc


def _describe(revision: str | None) -> str:
    head = migrations.head()
    if revision is None:
        return f"base: agentledger's tables are absent (head is {head})"
    if revision == head:
        return f"{revision} (head)"
    return f"{revision} (head is {head})"


def _where(url: str, schema: str | None) -> str:
    return mask(url) + (f" schema {schema}" if schema else "")


def _one_line(exc: AgentLedgerError) -> str:
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    hint = getattr(exc, "hint", None)
    return f"{message}; to fix: {hint}" if hint else message


def _say(message: str) -> None:
    print(message)


def _error(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr)
