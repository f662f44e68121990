"""``agentledger ui``: serve the session viewer (``agentledger.ui``, the ``ui`` extra)."""

from __future__ import annotations

import argparse
import importlib.util

from ..environment import UI_TOKEN, value_of
from ..ui import is_loopback, masked, serve
from .common import (
    EXIT_ERROR,
    EXIT_OK,
    Groups,
    UsageError,
    add_connection_options,
    add_reader_option,
    connection_of,
    ledger_of,
)
from .output import error, say

UI_PACKAGES = ("starlette", "jinja2", "uvicorn", "python_multipart")
"""What the viewer needs besides agentledger: the ``ui`` extra's modules (pyproject.toml;
a test keeps the two in step)."""
DEFAULT_PORT = 8765


def add_ui_group(groups: Groups) -> None:
    """Add ``ui``: the viewer in the browser."""
    ui = groups.add_parser(
        "ui",
        help="a read-only session viewer in the browser (needs agentledger[ui])",
        description="Serve a web viewer of the sessions, their conversations, steps, "
        "grants, checkpoints, state and token usage. Read-only unless --allow-delete.",
    )
    add_connection_options(ui)
    add_reader_option(ui)
    ui.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    ui.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    ui.add_argument(
        "--token",
        help=f"access token every request must carry (default ${UI_TOKEN.name}, better: a "
        "command line is visible to other users); required when --host is not loopback",
    )
    ui.add_argument(
        "--allow-delete",
        action="store_true",
        help="allow deleting a session (after a confirmation, with a CSRF token)",
    )
    ui.set_defaults(handler=_ui)


def missing_packages() -> list[str]:
    """The packages of the ``ui`` extra that are not installed."""
    return [name for name in UI_PACKAGES if importlib.util.find_spec(name) is None]


def _ui(args: argparse.Namespace) -> int:
    missing = missing_packages()
    if missing:
        error(f"the viewer needs {', '.join(missing)}; to fix: pip install 'agentledger[ui]'")
        return EXIT_ERROR
    token = args.token or value_of(UI_TOKEN)
    if token is None and not is_loopback(args.host):
        raise UsageError(
            f"--host {args.host} is reachable from other machines: give --token (or set "
            f"${UI_TOKEN.name}), which every request must then carry"
        )
    if not 0 < args.port < 65536:
        raise UsageError("--port takes 1 to 65535")
    with ledger_of(args) as ledger:  # the schema checked (exit 3/4) before serving
        ledger.sessions.list(limit=1)
    url, schema = connection_of(args)
    mode = "deletes allowed" if args.allow_delete else "read-only"
    address = f"[{args.host}]" if ":" in args.host else args.host
    say(f"agentledger ui: {masked(url)} ({mode}) on http://{address}:{args.port}/")
    if token is not None:
        say(
            "every request needs the token: open the page once with ?token=..., or send "
            "Authorization: Bearer ..."
        )
    say("Ctrl-C stops it")
    serve(
        url,
        host=args.host,
        port=args.port,
        schema=schema,
        token=token,
        allow_delete=args.allow_delete,
        readers=args.reader,
    )
    return EXIT_OK
