"""The environment variables an operator sets, in one table (``VARIABLES``): each one's
name, meaning, default and who reads it. The command line's help lists this table and
each option names its variable; a test holds the help to the table, so neither drifts.

A command-line option wins over its variable; an empty variable counts as unset; a
malformed one is an error that names it (``EnvironmentValueError``). Two are read by
the library too: ``AGENTLEDGER_DATABASE_URL`` (``Ledger()`` without a URL, the Alembic
``env.py``, ADK's ``agentledger://``) and ``AGENTLEDGER_PROFILE`` (which statements the
process sends, read once at import); an application sets its schema and timeouts in
code, where they cannot change under it.

This module imports nothing of agentledger's, so every module can read it.
"""

from __future__ import annotations

import math
import os
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_URL = "sqlite:///agentledger.db"
"""The database of a command (or ``Ledger()``) given no URL at all."""
MAX_TIMEOUT_S = 86_400
"""The longest lock or statement timeout a ledger takes: one day."""


@dataclass(frozen=True)
class Variable:
    """One environment variable of the table."""

    name: str
    """Its name, ``AGENTLEDGER_...``."""
    meaning: str
    """What it sets, in a few words."""
    default: str
    """What holds when it is unset, in words."""
    option: str | None
    """The command-line option that wins over it, if any."""
    read_by: str
    """Who reads it."""


DATABASE_URL = Variable(
    "AGENTLEDGER_DATABASE_URL",
    "the database URL",
    DEFAULT_URL,
    "--url",
    "every command; also Ledger()/AsyncLedger() without a URL, the Alembic env.py, "
    "ADK's agentledger://",
)
SCHEMA = Variable(
    "AGENTLEDGER_SCHEMA",
    "the PostgreSQL schema holding agentledger's tables (PostgreSQL only)",
    "none: the search_path's first schema",
    "--schema",
    "every command",
)
LOCK_TIMEOUT = Variable(
    "AGENTLEDGER_LOCK_TIMEOUT",
    "seconds a statement waits for a lock before it fails",
    "15",
    "--lock-timeout",
    "the commands that read or write sessions (sessions, export, import, copy, purge)",
)
STATEMENT_TIMEOUT = Variable(
    "AGENTLEDGER_STATEMENT_TIMEOUT",
    "seconds a statement may run before the server cancels it (not on SQLite)",
    "none: no limit",
    "--statement-timeout",
    "the commands that read or write sessions (sessions, export, import, copy, purge)",
)
UI_TOKEN = Variable(
    "AGENTLEDGER_UI_TOKEN",
    "the access token every request to the viewer must carry",
    "none: no token (refused unless the viewer listens on loopback only)",
    "--token",
    "agentledger ui",
)
PROFILE = Variable(
    "AGENTLEDGER_PROFILE",
    "the statements agentledger sends: native (each database's own fast paths) or "
    "portable (what SQLAlchemy's ORM and Core give on any dialect)",
    "native",
    None,
    "the library, once when it is imported: every ledger and command of the process",
)
VARIABLES = (DATABASE_URL, SCHEMA, LOCK_TIMEOUT, STATEMENT_TIMEOUT, UI_TOKEN, PROFILE)
"""Every variable agentledger reads, in the order the help lists them."""


class EnvironmentValueError(ValueError):
    """Raised when a variable of the table is set to a value its reader cannot use;
    the message names the variable and says what it takes."""


def value_of(variable: Variable, environ: Mapping[str, str] | None = None) -> str | None:
    """The variable's value, None when unset or empty (``environ``: ``os.environ``)."""
    return (os.environ if environ is None else environ).get(variable.name) or None


def seconds_of(variable: Variable, environ: Mapping[str, str] | None = None) -> float | None:
    """A timeout variable's seconds, None when unset.

    Raises:
        EnvironmentValueError: not a number above 0 and at most ``MAX_TIMEOUT_S``.
    """
    text = value_of(variable, environ)
    if text is None:
        return None
    try:
        return parse_seconds(text)
    except ValueError as exc:
        raise EnvironmentValueError(f"{variable.name}={text!r}: {exc}; or unset it") from None


def parse_seconds(text: str) -> float:
    """A timeout given as text (``2``, ``0.5``) in seconds.

    Raises:
        ValueError: not a number above 0 and at most ``MAX_TIMEOUT_S``.
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT_S):
        raise ValueError(f"takes a number of seconds above 0 and at most {MAX_TIMEOUT_S:,}")
    return value


HELP_WIDTH = 80
"""The width ``help_text`` wraps its lines to."""


def help_text() -> str:
    """The table as the command line's help prints it: a name a line, then what it
    sets, its default and the option that wins over it, indented below."""
    lines = ["environment (an option given on the command line wins over its variable):"]
    for variable in VARIABLES:
        lines.append(f"  {variable.name}")
        option = f"; option {variable.option}" if variable.option else ""
        described = f"{variable.meaning}; default {variable.default}{option}"
        lines.extend(
            textwrap.wrap(described, HELP_WIDTH, initial_indent=" " * 6, subsequent_indent=" " * 6)
        )
    return "\n".join(lines)


def markdown_table() -> str:
    """The table in Markdown, for the documentation."""
    rows = ["| variable | what it sets | default | option | read by |", "|---|---|---|---|---|"]
    for variable in VARIABLES:
        option = f"`{variable.option}`" if variable.option else "-"
        rows.append(
            f"| `{variable.name}` | {variable.meaning} | {variable.default} | {option} | "
            f"{variable.read_by} |"
        )
    return "\n".join(rows)
