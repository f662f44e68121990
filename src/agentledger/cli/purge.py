"""``agentledger purge``: retention rules (old sessions, expired and surplus checkpoints,
expired memories), a dry run, and SQLite's VACUUM, over ``agentledger.retention``."""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import Any

from .. import retention
from ..clock import format_time
from ..engine import is_sqlite, mask
from ..ledger import Ledger
from ..transfer import Progress
from .common import (
    EXIT_OK,
    Groups,
    UsageError,
    add_batch,
    add_connection_options,
    add_timeout_options,
    database_url,
    ledger_of,
    parse_duration,
)
from .output import TITLE_WIDTH, byte_size, clean, count, progress_line, say, shorten

_VACUUM_HINT_BYTES = 1024 * 1024
"""Freed space from which a purge suggests ``--vacuum``."""


def add_purge_group(groups: Groups) -> None:
    """Add ``purge``."""
    purge = groups.add_parser(
        "purge",
        help="delete old sessions, checkpoints and memories (retention)",
        description="Delete sessions not updated for a while (with all their rows), expired "
        "checkpoints, checkpoints beyond the newest K of each session, and long-term memory "
        "items past their time to live. --dry-run lists what would go and changes nothing.",
    )
    add_connection_options(purge)
    add_timeout_options(purge)
    purge.add_argument(
        "--older-than", metavar="AGE", help="sessions not updated for AGE (30d, 12h, 2w)"
    )
    purge.add_argument(
        "--checkpoints-expired", action="store_true", help="checkpoints past their expiry"
    )
    purge.add_argument(
        "--keep-checkpoints",
        type=int,
        metavar="K",
        help="keep the newest K unexpired checkpoints of each session (expired ones go too)",
    )
    purge.add_argument(
        "--expired-memories",
        action="store_true",
        help="long-term memory items past their time to live (not with --user or --app)",
    )
    purge.add_argument("--user", metavar="USER", help="only sessions of this user_id")
    purge.add_argument("--app", metavar="APP", help="only sessions of this app_name")
    purge.add_argument("--dry-run", action="store_true", help="list what would go; change nothing")
    purge.add_argument("-v", "--verbose", action="store_true", help="list every item deleted")
    purge.add_argument(
        "--vacuum", action="store_true", help="SQLite: give the freed space back (VACUUM)"
    )
    add_batch(purge, retention.DEFAULT_BATCH)
    purge.set_defaults(handler=_purge)


def _purge(args: argparse.Namespace) -> int:
    rules = {
        "older_than": _age(args.older_than) if args.older_than else None,
        "expired_checkpoints": args.checkpoints_expired,
        "keep_checkpoints": args.keep_checkpoints,
        "expired_memories": args.expired_memories,
        "app_name": args.app,
        "user_id": args.user,
    }
    has_rule = (
        args.older_than
        or args.checkpoints_expired
        or args.keep_checkpoints is not None
        or args.expired_memories
    )
    if not has_rule and not args.vacuum:
        raise UsageError(
            "say what to purge: --older-than AGE, --checkpoints-expired, --keep-checkpoints K, "
            "--expired-memories (or --vacuum alone)"
        )
    if args.expired_memories and (args.user or args.app):
        raise UsageError(
            "--expired-memories: memory items belong to no user's or app's session; "
            "leave out --user and --app"
        )
    if args.vacuum and args.dry_run:
        raise UsageError("--vacuum changes the file; leave it out of a --dry-run")
    url = database_url(args)
    if args.vacuum and not is_sqlite(url):
        raise UsageError(
            "--vacuum is for SQLite; PostgreSQL and MariaDB reuse freed space themselves"
        )
    with ledger_of(args) as ledger:
        if has_rule:
            _purge_rules(ledger, args, rules, url)
        if args.vacuum:
            done = ledger.retention.vacuum()
            say(f"vacuum: the file went from {byte_size(done.before)} to {byte_size(done.after)}")
    return EXIT_OK


def _age(value: str) -> timedelta:
    age = parse_duration(value)
    if age is None:
        raise UsageError(f"expected a duration such as 30d, 12h or 2w, got {value!r}")
    return age


def _purge_rules(ledger: Ledger, args: argparse.Namespace, rules: dict[str, Any], url: str) -> None:
    listing = args.dry_run or args.verbose
    with progress_line("purge", unit="deleted", enabled=not listing) as progress:
        deleted = 0

        def on_item(item: retention.PurgeItem) -> None:
            nonlocal deleted
            deleted += 1
            if listing:
                say(_purge_line(item))
            elif progress is not None:
                progress(Progress(done=deleted, total=None, unit="rows"))

        run = ledger.retention.plan_purge if args.dry_run else ledger.retention.purge
        report = run(retention.PurgePolicy(**rules), batch=args.batch, on_item=on_item)
    parts = [
        f"{count(report.sessions, 'session')} ({count(report.messages, 'message')}, "
        f"{count(report.steps, 'step')})",
        count(report.checkpoints, "checkpoint"),
    ]
    if rules["expired_memories"]:
        parts.append(count(report.memories, "memory item"))
    what = ", ".join(parts[:-1]) + " and " + parts[-1]
    if not report.applied:
        say(f"dry run: would delete {what}; nothing was changed")
        return
    say(f"deleted {what}")
    free = report.sqlite_free_bytes or 0  # None off SQLite
    if free >= _VACUUM_HINT_BYTES and not args.vacuum:
        say(
            f"SQLite keeps the {byte_size(free)} freed inside the file; to give it back to the "
            f"disk run: agentledger purge --vacuum --url '{mask(url)}' (VACUUM)"
        )


def _purge_line(item: retention.PurgeItem) -> str:
    if item.kind == "session":
        title = f"  {shorten(clean(item.title), TITLE_WIDTH)}" if item.title else ""
        return (
            f"session     {item.id}  {item.reason}  updated {format_time(item.at)}  "
            f"{count(item.messages, 'message')}, {count(item.steps, 'step')}{title}"
        )
    expires = format_time(item.expires_at) if item.expires_at else "never"
    if item.kind == "memory":
        namespace = "/".join(item.namespace or ())
        return (
            f"memory      {namespace} {item.id}  {item.reason}  "
            f"written {format_time(item.at)}  expired {expires}"
        )
    return (
        f"checkpoint  {item.id}  {item.reason}  session {item.session_id} seq {item.seq}  "
        f"created {format_time(item.at)}  expires {expires}  {byte_size(item.size or 0)}"
    )
