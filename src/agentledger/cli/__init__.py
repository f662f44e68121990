"""The ``agentledger`` command line.

Where things live (imports run down this list, never up):

- ``__init__``: ``main`` (the console script and ``python -m agentledger``) and the
  parser, assembled from the command groups in ``_GROUPS``.
- One module per command group, each a thin shell over the library (parse, call,
  print): ``db`` (migrations), ``sessions`` (list, show, delete), ``transfer``
  (export, import, copy), ``purge`` (retention and VACUUM), ``ui`` (the viewer in the
  browser; ``agentledger.ui``, the ``ui`` extra). A new group is one more
  module and one more entry in ``_GROUPS``.
- ``lookup``: finding a session by agentledger's id or a framework's key.
- ``common``: what every command shares: the exit codes, ``--url``, ``--schema`` and
  the timeouts, each option else its environment variable (``agentledger.environment``,
  the one table of them, which ``--help`` lists), opening a ledger, and ``run``, the
  one rule that turns an error into one line on stderr (never a traceback, never a
  password) and an exit code.
- ``output``: lines, tables, the progress line, counts, byte sizes, times, and text
  made safe for a terminal.

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
import sys
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version

from ..environment import help_text
from .common import (
    EXIT_CONFLICTS,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SCHEMA,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    Groups,
    Handler,
    Parser,
    add_commands,
    run,
)
from .db import add_db_group
from .output import PROG
from .purge import add_purge_group
from .sessions import add_sessions_group
from .transfer import add_transfer_groups
from .ui import add_ui_group

_GROUPS: tuple[Callable[[Groups], None], ...] = (
    add_db_group,
    add_sessions_group,
    add_transfer_groups,
    add_purge_group,
    add_ui_group,
)


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
    return run(handler, args)


def _parser() -> Parser:
    parser = Parser(
        prog=PROG,
        description="agentledger: the durable memory of AI-agent harnesses.",
        epilog="exit codes: 0 ok, 1 error, 2 usage, 3 schema not at head, 4 database\n"
        "unreachable, 5 import/copy left conflicting rows as they were\n\n" + help_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    groups = add_commands(parser)
    for add_group in _GROUPS:
        add_group(groups)
    return parser


def _version() -> str:
    try:
        return version("agentledger")
    except PackageNotFoundError:
        return "unknown"


__all__ = [
    "EXIT_CONFLICTS",
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_SCHEMA",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "main",
]
