"""What every command shares: exit codes, the connection options, URL and schema
resolution, opening a ledger, and the rule that turns an error into one line on stderr
and an exit code (``run``)."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import NoReturn, TypeAlias, TypedDict, Unpack

from .. import migrations
from .._translate import scrub_urls
from ..engine import DEFAULT_URL, URL_ENV, is_sqlite, resolve_url, sqlite_file, validate_schema
from ..environment import (
    DATABASE_URL,
    LOCK_TIMEOUT,
    SCHEMA,
    STATEMENT_TIMEOUT,
    EnvironmentValueError,
    Variable,
    parse_seconds,
    seconds_of,
    value_of,
)
from ..errors import (
    AgentLedgerError,
    DatabaseUnavailableError,
    InvalidIdError,
    SchemaError,
    ValidationError,
)
from ..ledger import Ledger
from .output import error

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_SCHEMA = 3
EXIT_UNAVAILABLE = 4
EXIT_CONFLICTS = 5
EXIT_INTERRUPTED = 130

UNREACHABLE_HINT = (
    f"check that the database server is running and that the URL (--url or ${URL_ENV}) "
    "names the right host, port and database"
)

Handler = Callable[[argparse.Namespace], int]
"""A command: reads its parsed arguments, returns the exit code."""

_DURATION = re.compile(r"(\d+)\s*([smhdw])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


class UsageError(Exception):
    """A request the command line or the database cannot serve, reported like a usage
    error (exit 2)."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors exit with ``EXIT_USAGE``."""

    def error(self, message: str) -> NoReturn:
        """Print the usage and the message on stderr, then exit 2."""
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


Groups: TypeAlias = "argparse._SubParsersAction[Parser]"
"""Where a command group adds its parser: ``parser.add_subparsers(...)``'s result."""


def add_commands(parser: argparse.ArgumentParser) -> Groups:
    """The sub-commands of ``parser`` (a group's commands, or the top-level groups)."""
    return parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=Parser)


# --- running a command --------------------------------------------------------------------


def run(handler: Handler, args: argparse.Namespace) -> int:
    """Run a command; an error becomes one line on stderr (never a traceback, never a
    password) and the exit code that names its kind."""
    try:
        return handler(args)
    except KeyboardInterrupt:
        error("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `agentledger db sql | head`: the reader left; not our error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_ERROR
    except (UsageError, EnvironmentValueError) as exc:
        error(str(exc))
        return EXIT_USAGE
    except (ValidationError, InvalidIdError) as exc:
        error(one_line(exc))
        return EXIT_USAGE
    except DatabaseUnavailableError as exc:
        error(f"{one_line(exc)}; to fix: {unreachable_hint(args)}")
        return EXIT_UNAVAILABLE
    except SchemaError as exc:
        error(one_line(exc))
        return EXIT_SCHEMA if exc.head is not None else EXIT_ERROR
    except AgentLedgerError as exc:
        error(one_line(exc))
        return EXIT_ERROR
    except Exception as exc:  # a bug or a driver's raw error: still one line, no secret
        message = f"unexpected {type(exc).__name__}: {exc}".splitlines()[0]
        error(
            f"{_scrubbed(message, args)}; to fix: this is agentledger failing, please "
            "report it with the command that you ran (its URL's password left out)"
        )
        return EXIT_ERROR


def _scrubbed(text: str, args: argparse.Namespace) -> str:
    """``text`` with the passwords of every URL the command was given masked."""
    urls = [getattr(args, name, None) for name in ("url", "source", "target")]
    urls.append(value_of(DATABASE_URL))
    return scrub_urls(text, [url for url in urls if isinstance(url, str)])


def _options(args: argparse.Namespace) -> str:
    """How the command was told its database(s): ``--url or $...``, or ``--from / --to``."""
    return "--from / --to" if hasattr(args, "source") else f"--url or ${URL_ENV}"


def unreachable_hint(args: argparse.Namespace) -> str:
    """What to check when a database cannot be reached: a server's address, or for
    SQLite the file (a server hint would send the user looking for a server)."""
    urls = [getattr(args, name, None) for name in ("url", "source", "target")]
    given = [url for url in urls if isinstance(url, str)] or [value_of(DATABASE_URL) or DEFAULT_URL]
    if all(_is_sqlite_url(url) for url in given):
        return (
            f"check that the URL ({_options(args)}) names a SQLite database file that "
            "this user can read and write"
        )
    return UNREACHABLE_HINT.replace(f"--url or ${URL_ENV}", _options(args))


def _is_sqlite_url(url: str) -> bool:
    try:
        return is_sqlite(url)
    except AgentLedgerError:
        return False


def one_line(exc: AgentLedgerError) -> str:
    """The error's first line, with its hint after ``; to fix:`` when it has one."""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    hint = getattr(exc, "hint", None)
    return f"{message}; to fix: {hint}" if hint else message


# --- shared options -----------------------------------------------------------------------


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """``--url`` and ``--schema``: the database a command works on."""
    parser.add_argument(
        "--url",
        help=f"database URL (default: ${URL_ENV}, else {DEFAULT_URL})",
    )
    parser.add_argument(
        "--schema",
        metavar="NAME",
        help=f"PostgreSQL schema holding agentledger's tables (PostgreSQL only; default: "
        f"${SCHEMA.name}, else {SCHEMA.default})",
    )


def add_reader_option(parser: argparse.ArgumentParser) -> None:
    """``--reader``: read replicas a command that only reads may read from."""
    parser.add_argument(
        "--reader",
        metavar="URL",
        action="append",
        help="a read replica of the database (a PostgreSQL standby, a Galera node) to "
        "read from instead; repeat for several (a replica may lag the primary)",
    )


def add_timeout_options(parser: argparse.ArgumentParser) -> None:
    """``--lock-timeout`` and ``--statement-timeout``: the ledger's timeouts."""
    for variable in (LOCK_TIMEOUT, STATEMENT_TIMEOUT):
        assert variable.option is not None
        parser.add_argument(
            variable.option,
            type=_seconds,
            metavar="SECONDS",
            help=f"{variable.meaning} (default: ${variable.name}, else {variable.default})",
        )


def _seconds(text: str) -> float:
    try:
        return parse_seconds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None


class Timeouts(TypedDict, total=False):
    """The timeouts a command gives its ledgers (``Ledger``'s keywords)."""

    lock_timeout: float | None
    statement_timeout: float | None


def timeouts_of(args: argparse.Namespace) -> Timeouts:
    """The ledger's ``lock_timeout`` and ``statement_timeout``: each option, else its
    variable, else None (the ledger's default); nothing for a command without them."""
    if not hasattr(args, "lock_timeout"):
        return {}
    return {
        "lock_timeout": _option_else(args.lock_timeout, LOCK_TIMEOUT),
        "statement_timeout": _option_else(args.statement_timeout, STATEMENT_TIMEOUT),
    }


def _option_else(given: float | None, variable: Variable) -> float | None:
    return given if given is not None else seconds_of(variable)


def add_batch(parser: argparse.ArgumentParser, default: int) -> None:
    """``--batch N``: rows per batch."""
    parser.add_argument(
        "--batch",
        type=int,
        default=default,
        metavar="N",
        help=f"rows per batch (default {default})",
    )


def parse_duration(value: str) -> timedelta | None:
    """``30d``, ``12h``, ``2w``... (seconds to weeks) as a timedelta; None when it is not
    one."""
    match = _DURATION.fullmatch(value.strip())
    if match is None:
        return None
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


# --- URLs, schemas and ledgers ------------------------------------------------------------


def database_url(args: argparse.Namespace) -> str:
    """--url, else $AGENTLEDGER_DATABASE_URL, else the local SQLite file."""
    from_environment = None if args.url else value_of(DATABASE_URL)
    url: str = args.url or from_environment or DEFAULT_URL
    try:
        resolve_url(url, asynchronous=False)  # an unusable URL is a usage error, before any I/O
    except ValidationError as exc:
        if from_environment is None:
            raise
        raise UsageError(f"{DATABASE_URL.name}: {one_line(exc)}; or unset it") from exc
    return url


def checked_schema(schema: str | None, url: str) -> str | None:
    """The --schema value, refused as a usage error when invalid or off PostgreSQL."""
    if schema is None:
        return None
    try:
        return validate_schema(schema, resolve_url(url, asynchronous=False).get_backend_name())
    except SchemaError as exc:
        raise UsageError(one_line(exc)) from exc


def schema_of(args: argparse.Namespace, url: str) -> str | None:
    """--schema, else $AGENTLEDGER_SCHEMA, else None; checked against ``url``."""
    if args.schema is not None:
        return checked_schema(args.schema, url)
    from_environment = value_of(SCHEMA)
    try:
        return checked_schema(from_environment, url)
    except (UsageError, ValidationError) as exc:
        problem = str(exc) if isinstance(exc, UsageError) else one_line(exc)
        raise UsageError(f"{SCHEMA.name}={from_environment!r}: {problem}; or unset it") from exc


def connection_of(args: argparse.Namespace) -> tuple[str, str | None]:
    """The URL and the checked schema that ``--url`` and ``--schema`` (or their
    variables) name."""
    url = database_url(args)
    return url, schema_of(args, url)


SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file (an empty file is one, too)."""


def existing_database(url: str, *, option: str = "--url") -> str:
    """The URL, refused before connecting when it names a SQLite file that does not
    exist (connecting would create an empty one), a folder that does not exist, a
    directory, or a file that is not a SQLite database. ``option`` is how the command
    takes the URL (``--url``, ``--from``, ``--to``), for the hint."""
    path = sqlite_file(url)
    if path is None:
        return url
    elsewhere = f"pass {option} with another path" + (
        f", or set {URL_ENV}" if option == "--url" else ""
    )
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"{path} is a directory, not a SQLite database file; {elsewhere}")
    if not os.path.isdir(folder):
        raise UsageError(
            f"there is no folder {folder} for the SQLite database {path}; create the "
            f"folder, or {elsewhere}"
        )
    if not os.path.exists(path):
        raise SchemaError(
            f"there is no SQLite database at {path} (agentledger's tables are missing)",
            head=migrations.head(),
            hint=f"{migrations.upgrade_hint(url)} creates it; or {elsewhere}",
        )
    if not _looks_like_sqlite(path):
        raise UsageError(f"{path} is not a SQLite database file; {elsewhere}")
    return url


def _looks_like_sqlite(path: str) -> bool:
    try:
        with open(path, "rb") as file:
            start = file.read(len(SQLITE_HEADER))
    except OSError:  # unreadable: connecting says why
        return True
    return start in (b"", SQLITE_HEADER)


@contextmanager
def open_ledger(
    url: str,
    schema: str | None,
    readers: list[str] | None = None,
    **timeouts: Unpack[Timeouts],
) -> Iterator[Ledger]:
    """A Ledger on ``url`` (checked by ``existing_database`` first) and --schema, with
    ``readers`` (``--reader``) and the ``timeouts_of`` the command, closed after use."""
    ledger = Ledger(url, schema=checked_schema(schema, url), readers=readers, **timeouts)
    try:
        yield ledger
    finally:
        ledger.close()


@contextmanager
def ledger_of(args: argparse.Namespace) -> Iterator[Ledger]:
    """The Ledger on the existing database that ``--url`` and ``--schema`` name, with
    the command's ``--reader`` replicas and timeouts."""
    url, schema = connection_of(args)
    readers = getattr(args, "reader", None)
    with open_ledger(existing_database(url), schema, readers, **timeouts_of(args)) as ledger:
        yield ledger
