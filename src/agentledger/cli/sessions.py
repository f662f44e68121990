"""``agentledger sessions ...``: list, show and delete, over the ledger's repositories and
``ledger.sessions.overview``. ``show`` and ``delete`` take agentledger's id or a
framework's key (``lookup.find_session``); ``list`` shows the key and filters by it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator

from ..ids import framework_of
from ..langgraph_records import SessionRows
from ..ledger import Ledger
from ..records import Message, SessionOverview, SessionSummary, Step
from .common import (
    EXIT_OK,
    Groups,
    UsageError,
    add_commands,
    add_connection_options,
    add_reader_option,
    add_timeout_options,
    ledger_of,
)
from .lookup import Scope, find_session
from .output import (
    TITLE_WIDTH,
    byte_size,
    clean,
    content_text,
    count,
    say,
    shorten,
    shown,
    table,
    warn,
    when,
)

MESSAGE_CHARS = 600
"""Characters of a message shown by ``sessions show`` without ``--full``."""
KEY_WIDTH = 40
"""Characters of a session's key shown in a one-line listing: a UUID (ADK's session
ids) fits whole."""
ID_OR_KEY = (
    "agentledger's session id, or a framework's key for it (a LangGraph thread id, an "
    "ADK or OpenAI Agents session id)"
)


def add_sessions_group(groups: Groups) -> None:
    """Add ``sessions`` and its commands."""
    sessions = groups.add_parser(
        "sessions",
        help="list, show and delete sessions",
        description="Look at the sessions a ledger holds.",
    )
    sessions.set_defaults(group_parser=sessions)
    commands = add_commands(sessions)

    listing = commands.add_parser("list", help="sessions, most recently updated first")
    add_connection_options(listing)
    add_reader_option(listing)
    add_timeout_options(listing)
    listing.add_argument("--user", metavar="USER", help="only this user_id")
    listing.add_argument("--app", metavar="APP", help="only this app_name")
    listing.add_argument("--status", help="only this status (active, completed, failed...)")
    listing.add_argument(
        "--key",
        metavar="KEY",
        help="only the sessions with this key (a LangGraph thread id, an ADK or OpenAI "
        "Agents session id), in any app and user unless --app or --user narrow it",
    )
    listing.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    listing.add_argument("--all", action="store_true", help="every session, however many")
    listing.add_argument("--json", action="store_true", help="a JSON array, for scripts")
    listing.set_defaults(handler=_list)

    show = commands.add_parser("show", help="one session: conversation, steps, grants, checkpoints")
    add_connection_options(show)
    add_reader_option(show)
    add_timeout_options(show)
    show.add_argument("id", metavar="ID", help=ID_OR_KEY)
    _add_scope_options(show)
    show.add_argument(
        "--messages", type=int, default=100, metavar="N", help="last N messages (default 100)"
    )
    show.add_argument(
        "--steps", type=int, default=20, metavar="N", help="last N steps (default 20)"
    )
    show.add_argument(
        "--checkpoints", type=int, default=10, metavar="N", help="newest N checkpoints (default 10)"
    )
    show.add_argument("--full", action="store_true", help="print messages in full, not shortened")
    show.set_defaults(handler=_show)

    remove = commands.add_parser("delete", help="delete sessions with all their rows")
    add_connection_options(remove)
    add_timeout_options(remove)
    remove.add_argument("ids", nargs="+", metavar="ID", help=ID_OR_KEY)
    _add_scope_options(remove)
    remove.set_defaults(handler=_delete)


def _add_scope_options(parser: argparse.ArgumentParser) -> None:
    """``--app`` and ``--user``: the scope a key is looked for in."""
    parser.add_argument(
        "--app", metavar="APP", help="only a session of this app_name (a key used in several)"
    )
    parser.add_argument(
        "--user", metavar="USER", help="only a session of this user_id (a key used by several)"
    )


def _scope(args: argparse.Namespace) -> Scope:
    return Scope(app_name=args.app, user_id=args.user)


# --- list ---------------------------------------------------------------------------------


def _list(args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= 100_000:
        raise UsageError("--limit takes 1 to 100000")
    more = [False]
    with ledger_of(args) as ledger:
        if args.json:
            _write_json(_summaries(ledger, args, more))
            _say_more(args, more[0])
            return EXIT_OK
        items = list(_summaries(ledger, args, more))
        paused = _paused_threads(ledger, items)
        rows = [
            [
                item.id,
                shorten(clean(item.external_key or "-"), KEY_WIDTH),
                shorten(clean(item.title or "-"), TITLE_WIDTH),
                "paused" if item.id in paused else clean(item.status),
                f"{item.step_count:,}",
                f"{item.total_tokens:,}",
                when(item.updated_at),
            ]
            for item in items
        ]
    if not rows:
        say("no sessions")
        return EXIT_OK
    header = ["ID", "KEY", "TITLE", "STATUS", "STEPS", "TOKENS", "UPDATED (UTC)"]
    table(header, rows, right={4, 5})
    _say_more(args, more[0])
    return EXIT_OK


def _paused_threads(ledger: Ledger, items: list[SessionSummary]) -> set[str]:
    """The LangGraph threads among ``items`` paused at an interrupt: their session stays
    "active", and the list says "paused" instead, as the viewer does."""
    threads = [item.id for item in items if framework_of(item.id) == "langgraph"]
    paused: set[str] = set()
    for start in range(0, len(threads), PAUSED_BATCH):
        paused.update(ledger.langgraph().paused(threads[start : start + PAUSED_BATCH]))
    return paused


PAUSED_BATCH = 1000
"""Threads asked about per query (``paused`` takes at most 1,000 ids)."""


def _say_more(args: argparse.Namespace, more: bool) -> None:
    """On stderr (so piped output stays a clean table or JSON): that the listing was
    cut at --limit, and how to see the rest."""
    if more:
        warn(
            f"{count(args.limit, 'session')} shown, more exist: pass --limit N "
            "for more, or --all for every one"
        )


def _summaries(
    ledger: Ledger, args: argparse.Namespace, more: list[bool]
) -> Iterator[SessionSummary]:
    """Up to --limit summaries (every one with --all), newest first, page by page;
    ``more[0]`` is set when there are more than were yielded."""
    left, cursor = (None if args.all else args.limit), None
    while True:
        page = ledger.sessions.list(
            app_name=args.app,
            user_id=args.user,
            status=args.status,
            external_key=args.key,
            limit=1000 if left is None else max(1, min(left, 1000)),
            cursor=cursor,
            include=["external_key"],
        )
        if left == 0:
            more[0] = bool(page.items)
            return
        yield from page.items
        cursor = page.next_cursor
        if left is not None:
            left -= len(page.items)
        if cursor is None:
            return


def _write_json(items: Iterator[SessionSummary]) -> None:
    """A JSON array on stdout, one summary a line, written as the pages come."""
    written = 0
    sys.stdout.write("[")
    for item in items:
        sys.stdout.write(("," if written else "") + "\n  " + item.model_dump_json())
        written += 1
    sys.stdout.write("\n]\n" if written else "]\n")


# --- show ---------------------------------------------------------------------------------


def _show(args: argparse.Namespace) -> int:
    with ledger_of(args) as ledger:
        id = find_session(ledger, args.id, _scope(args)).id
        view = ledger.sessions.overview(
            id, messages=args.messages, steps=args.steps, checkpoints=args.checkpoints
        )
        threads = ledger.langgraph().session_rows(id, checkpoints=args.checkpoints, writes=0)
    record = view.session
    fields = [
        ("session", record.id),
        *([("key", record.external_key)] if record.external_key is not None else []),
        ("title", record.title or record.preview or "-"),
        ("status", f"{record.status}    model {record.model or '-'}"),
        ("scope", f"app {record.app_name or '-'}    user {record.user_id or '-'}"),
        ("created", f"{when(record.created_at)}    updated {when(record.updated_at)}"),
        (
            "tokens",
            f"{record.input_tokens:,} in, {record.output_tokens:,} out, "
            f"{record.total_tokens:,} total",
        ),
        ("revision", str(record.revision)),
    ]
    if record.last_run is not None:
        run = record.last_run
        ended = when(run.ended_at) if run.ended_at else "-"
        error = f"    error {clean(run.error)}" if run.error else ""
        fields.append(("last run", f"{run.status}    ended {ended}{error}"))
    for name, value in fields:
        say(f"{name:<9} {clean(_one_line(value))}")
    _show_messages(view.messages, record.message_count, args.full)
    _show_steps(view.steps, record.step_count)
    _show_grants(view)
    _show_checkpoints(view)
    if threads.checkpoints or framework_of(record.id) == "langgraph":
        _show_langgraph(threads)
    return EXIT_OK


def _one_line(value: str) -> str:
    """A field's value on its one line: a line break shown as ``\\n``, so a title
    cannot print lines that look like other fields."""
    return value.replace("\n", "\\n")


def _show_messages(messages: list[Message], total: int, full: bool) -> None:
    say("")
    say(f"conversation: {count(total, 'message')}" + shown(len(messages), total, "last"))
    for message in messages:
        say(f"  [{message.seq}] {clean(message.role)}  {when(message.created_at)}")
        text = content_text(message.content)
        if not full:
            text = shorten(text, MESSAGE_CHARS)
        for line in text.splitlines() or [""]:
            say(f"      {clean(line)}")


def _show_steps(steps: list[Step], total: int) -> None:
    say("")
    say(f"steps: {total:,}" + shown(len(steps), total, "last"))
    if not steps:
        return
    rows = []
    for step in steps:
        took = f"{(step.ended_at - step.started_at).total_seconds():.1f}s" if step.ended_at else "-"
        rows.append(
            [
                str(step.seq),
                clean(step.kind),
                shorten(clean(step.name or step.model or "-"), 32),
                f"{step.usage.input_tokens:,}",
                f"{step.usage.output_tokens:,}",
                f"{step.usage.total_tokens:,}",
                when(step.started_at),
                took,
                shorten(clean(step.error or ""), 40),
            ]
        )
    header = ["SEQ", "KIND", "NAME/MODEL", "IN", "OUT", "TOTAL", "STARTED", "TOOK", "ERROR"]
    table(header, rows, right={0, 3, 4, 5, 7}, indent="  ")


def _show_grants(view: SessionOverview) -> None:
    say("")
    say(f"grants: {len(view.grants)} active")
    rows = [
        [
            shorten(clean(grant.capability), 60),
            clean(grant.granted_by or "-"),
            when(grant.granted_at),
            when(grant.expires_at) if grant.expires_at else "never",
        ]
        for grant in view.grants
    ]
    if rows:
        table(["CAPABILITY", "BY", "GRANTED", "EXPIRES"], rows, indent="  ")


def _show_checkpoints(view: SessionOverview) -> None:
    say("")
    latest = view.session.latest_checkpoint_ref
    say(f"checkpoints: {len(view.checkpoints)} unexpired shown, newest first")
    rows = [
        [
            info.ref + (" *" if info.ref == latest else ""),
            str(info.seq),
            info.parent_ref or "-",
            when(info.created_at),
            when(info.expires_at) if info.expires_at else "never",
            byte_size(info.size),
        ]
        for info in view.checkpoints
    ]
    if rows:
        table(
            ["REF (* latest)", "SEQ", "PARENT", "CREATED", "EXPIRES", "SIZE"],
            rows,
            right={1, 5},
            indent="  ",
        )


def _show_langgraph(threads: SessionRows) -> None:
    say("")
    shown_count = len(threads.checkpoints)
    if threads.more:
        say(f"langgraph checkpoints: more than {shown_count:,}, newest {shown_count:,} shown")
    else:
        say(f"langgraph checkpoints: {shown_count:,}, newest first")
    rows = [
        [
            row.checkpoint_id,
            clean(row.checkpoint_ns) or "-",
            clean(str(row.metadata.get("step", "-"))),
            clean(str(row.metadata.get("source", "-"))),
            when(row.created_at),
            byte_size(row.size),
        ]
        for row in threads.checkpoints
    ]
    if rows:
        table(
            ["CHECKPOINT", "NAMESPACE", "STEP", "SOURCE", "CREATED", "SIZE"],
            rows,
            right={2, 5},
            indent="  ",
        )


# --- delete -------------------------------------------------------------------------------


def _delete(args: argparse.Namespace) -> int:
    with ledger_of(args) as ledger:
        # Every id or key is resolved before the first delete: one that names no session,
        # or several, leaves all of them in place.
        ids = list(dict.fromkeys(find_session(ledger, text, _scope(args)).id for text in args.ids))
        for id in ids:
            record = ledger.sessions.get(id)
            ledger.sessions.delete(id)
            key = "" if record.external_key is None else f"key {record.external_key!r}; "
            say(
                f"deleted session {id} ({clean(key)}{count(record.message_count, 'message')}, "
                f"{count(record.step_count, 'step')}, with its grants and checkpoints)"
            )
    return EXIT_OK
