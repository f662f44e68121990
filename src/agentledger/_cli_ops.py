"""The operating commands of ``agentledger``: sessions, export, import, copy, purge.

A thin shell over the library (``overview``, ``transfer``, ``retention`` and the
ledger's repositories): parse, call, print. Tables and summaries go to stdout;
progress goes to stderr only when it is a terminal, so piped output stays quiet.
Exit codes are cli.py's (5: an import or copy left conflicting rows as they were).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import IO, Any

from . import migrations, overview, retention, transfer
from ._portable import format_time
from .cli import (
    EXIT_CONFLICTS,
    EXIT_OK,
    PROG,
    _add_connection_options,
    _one_line,
    _say,
    _schema,
    _url,
    _Usage,
)
from .engine import mask, resolve_url, validate_schema
from .errors import SchemaError
from .ledger import Ledger
from .records import Message, SessionSummary, Step

Groups = Any  # argparse._SubParsersAction of cli._Parser
_DURATION = re.compile(r"(\d+)\s*([smhdw])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
TITLE_WIDTH = 48
MESSAGE_CHARS = 600


def add_groups(groups: Groups) -> None:
    """Add the sessions, export, import, copy and purge commands."""
    _add_sessions(groups)
    _add_export(groups)
    _add_import(groups)
    _add_copy(groups)
    _add_purge(groups)


# --- parsers -------------------------------------------------------------------------------


def _add_selection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--session",
        dest="sessions",
        action="append",
        metavar="ID",
        help="only this session (repeat for more)",
    )
    parser.add_argument("--user", metavar="USER", help="only sessions of this user_id")
    parser.add_argument("--app", metavar="APP", help="only sessions of this app_name")
    parser.add_argument(
        "--since",
        metavar="WHEN",
        help="only sessions updated since WHEN: a duration back from now (7d, 12h) or an "
        "ISO date or time (UTC unless it has an offset)",
    )


def _add_batch(parser: argparse.ArgumentParser, default: int) -> None:
    parser.add_argument(
        "--batch",
        type=int,
        default=default,
        metavar="N",
        help=f"rows per batch (default {default})",
    )


def _add_sessions(groups: Groups) -> None:
    sessions = groups.add_parser(
        "sessions",
        help="list, show and delete sessions",
        description="Look at the sessions a ledger holds.",
    )
    sessions.set_defaults(group_parser=sessions)
    commands = sessions.add_subparsers(
        title="commands", metavar="COMMAND", parser_class=type(sessions)
    )

    listing = commands.add_parser("list", help="sessions, most recently updated first")
    _add_connection_options(listing)
    listing.add_argument("--user", metavar="USER", help="only this user_id")
    listing.add_argument("--app", metavar="APP", help="only this app_name")
    listing.add_argument("--status", help="only this status (active, completed, failed...)")
    listing.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    listing.add_argument("--json", action="store_true", help="a JSON array, for scripts")
    listing.set_defaults(handler=_sessions_list)

    show = commands.add_parser("show", help="one session: conversation, steps, grants, checkpoints")
    _add_connection_options(show)
    show.add_argument("id", metavar="ID")
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
    show.set_defaults(handler=_sessions_show)

    remove = commands.add_parser("delete", help="delete sessions with all their rows")
    _add_connection_options(remove)
    remove.add_argument("ids", nargs="+", metavar="ID")
    remove.set_defaults(handler=_sessions_delete)


def _add_export(groups: Groups) -> None:
    export = groups.add_parser(
        "export",
        help="write every table to JSON Lines",
        description="Export sessions with all their rows as JSON Lines (format version "
        f"{transfer.FORMAT_VERSION}: a header line, one line per row, an end line). "
        "One snapshot, streamed in constant memory.",
    )
    _add_connection_options(export)
    _add_selection(export)
    export.add_argument(
        "-o", "--output", metavar="FILE", help="write to FILE (.gz compresses) instead of stdout"
    )
    _add_batch(export, transfer.DEFAULT_BATCH)
    export.set_defaults(handler=_export)


def _add_import(groups: Groups) -> None:
    load = groups.add_parser(
        "import",
        help="import an export file (idempotent)",
        description="Insert the rows of an export that are missing; rows already stored "
        "with the same values are left alone, rows stored with other values are "
        "reported and kept (exit 5). Importing twice changes nothing.",
    )
    _add_connection_options(load)
    load.add_argument("file", metavar="FILE", help="an export (gzip is detected); - reads stdin")
    _add_batch(load, transfer.DEFAULT_BATCH)
    load.set_defaults(handler=_import)


def _add_copy(groups: Groups) -> None:
    copy = groups.add_parser(
        "copy",
        help="copy everything from one database to another",
        description="Copy sessions with all their rows between databases (SQLite to "
        "PostgreSQL, say): one snapshot of the source, one transaction per page of "
        "sessions on the target. Safe to run again after an interruption: rows already "
        "there are skipped. Both databases must be upgraded (agentledger db upgrade).",
    )
    copy.add_argument("--from", dest="source", required=True, metavar="URL", help="source")
    copy.add_argument("--to", dest="target", required=True, metavar="URL", help="target")
    copy.add_argument("--from-schema", metavar="NAME", help="source PostgreSQL schema")
    copy.add_argument("--to-schema", metavar="NAME", help="target PostgreSQL schema")
    _add_selection(copy)
    _add_batch(copy, transfer.DEFAULT_BATCH)
    copy.set_defaults(handler=_copy)


def _add_purge(groups: Groups) -> None:
    purge = groups.add_parser(
        "purge",
        help="delete old sessions and checkpoints (retention)",
        description="Delete sessions not updated for a while (with all their rows), expired "
        "checkpoints, and checkpoints beyond the newest K of each session. --dry-run lists "
        "what would go and changes nothing.",
    )
    _add_connection_options(purge)
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
    purge.add_argument("--user", metavar="USER", help="only sessions of this user_id")
    purge.add_argument("--app", metavar="APP", help="only sessions of this app_name")
    purge.add_argument("--dry-run", action="store_true", help="list what would go; change nothing")
    purge.add_argument("-v", "--verbose", action="store_true", help="list every item deleted")
    purge.add_argument(
        "--vacuum", action="store_true", help="SQLite: give the freed space back (VACUUM)"
    )
    _add_batch(purge, retention.DEFAULT_BATCH)
    purge.set_defaults(handler=_purge)


# --- sessions ------------------------------------------------------------------------------


def _sessions_list(args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= 100_000:
        raise _Usage("--limit takes 1 to 100000")
    with _ledger(args) as ledger:
        items = _summaries(ledger, args)
        if args.json:
            count = 0
            sys.stdout.write("[")
            for item in items:
                sys.stdout.write(("," if count else "") + "\n  " + item.model_dump_json())
                count += 1
            sys.stdout.write("\n]\n" if count else "]\n")
            return EXIT_OK
        rows = [
            [
                item.id,
                _shorten(item.title or "-", TITLE_WIDTH),
                item.status,
                f"{item.step_count:,}",
                f"{item.total_tokens:,}",
                _when(item.updated_at),
            ]
            for item in items
        ]
    if not rows:
        _say("no sessions")
        return EXIT_OK
    header = ["ID", "TITLE", "STATUS", "STEPS", "TOKENS", "UPDATED (UTC)"]
    _table(header, rows, right={3, 4})
    return EXIT_OK


def _summaries(ledger: Ledger, args: argparse.Namespace) -> Iterator[SessionSummary]:
    """Up to --limit summaries, newest first, page by page."""
    left, cursor = args.limit, None
    while left > 0:
        page = ledger.sessions.list(
            app_name=args.app,
            user_id=args.user,
            status=args.status,
            limit=min(left, 1000),
            cursor=cursor,
        )
        yield from page.items
        left -= len(page.items)
        cursor = page.next_cursor
        if cursor is None:
            return


def _sessions_show(args: argparse.Namespace) -> int:
    with _ledger(args) as ledger:
        view = overview.session_overview(
            ledger, args.id, messages=args.messages, steps=args.steps, checkpoints=args.checkpoints
        )
    record = view.session
    fields = [
        ("session", record.id),
        ("title", record.title or record.preview or "-"),
        ("status", f"{record.status}    model {record.model or '-'}"),
        ("scope", f"app {record.app_name or '-'}    user {record.user_id or '-'}"),
        ("created", f"{_when(record.created_at)}    updated {_when(record.updated_at)}"),
        (
            "tokens",
            f"{record.input_tokens:,} in, {record.output_tokens:,} out, "
            f"{record.total_tokens:,} total",
        ),
        ("revision", str(record.revision)),
    ]
    if record.last_run is not None:
        run = record.last_run
        ended = _when(run.ended_at) if run.ended_at else "-"
        error = f"    error {_clean(run.error)}" if run.error else ""
        fields.append(("last run", f"{run.status}    ended {ended}{error}"))
    for name, value in fields:
        _say(f"{name:<9} {_clean(value)}")
    _show_messages(view.messages, record.message_count, args.full)
    _show_steps(view.steps, record.step_count)
    _show_grants(view)
    _show_checkpoints(view)
    return EXIT_OK


def _show_messages(messages: list[Message], total: int, full: bool) -> None:
    _say("")
    _say(f"conversation: {_count(total, 'message')}" + _shown(len(messages), total, "last"))
    for message in messages:
        _say(f"  [{message.seq}] {_clean(message.role)}  {_when(message.created_at)}")
        text = _content_text(message.content)
        if not full:
            text = _shorten(text, MESSAGE_CHARS)
        for line in text.splitlines() or [""]:
            _say(f"      {_clean(line)}")


def _show_steps(steps: list[Step], total: int) -> None:
    _say("")
    _say(f"steps: {total:,}" + _shown(len(steps), total, "last"))
    if not steps:
        return
    rows = []
    for step in steps:
        took = f"{(step.ended_at - step.started_at).total_seconds():.1f}s" if step.ended_at else "-"
        rows.append(
            [
                str(step.seq),
                _clean(step.kind),
                _shorten(_clean(step.name or step.model or "-"), 32),
                f"{step.usage.input_tokens:,}",
                f"{step.usage.output_tokens:,}",
                f"{step.usage.total_tokens:,}",
                _when(step.started_at),
                took,
                _shorten(_clean(step.error or ""), 40),
            ]
        )
    header = ["SEQ", "KIND", "NAME/MODEL", "IN", "OUT", "TOTAL", "STARTED", "TOOK", "ERROR"]
    _table(header, rows, right={0, 3, 4, 5, 7}, indent="  ")


def _show_grants(view: overview.SessionOverview) -> None:
    _say("")
    _say(f"grants: {len(view.grants)} active")
    rows = [
        [
            _shorten(_clean(grant.capability), 60),
            _clean(grant.granted_by or "-"),
            _when(grant.granted_at),
            _when(grant.expires_at) if grant.expires_at else "never",
        ]
        for grant in view.grants
    ]
    if rows:
        _table(["CAPABILITY", "BY", "GRANTED", "EXPIRES"], rows, indent="  ")


def _show_checkpoints(view: overview.SessionOverview) -> None:
    _say("")
    latest = view.session.latest_checkpoint_ref
    _say(f"checkpoints: {len(view.checkpoints)} unexpired shown, newest first")
    rows = [
        [
            info.ref + (" *" if info.ref == latest else ""),
            str(info.seq),
            info.parent_ref or "-",
            _when(info.created_at),
            _when(info.expires_at) if info.expires_at else "never",
            _bytes(info.size),
        ]
        for info in view.checkpoints
    ]
    if rows:
        _table(
            ["REF (* latest)", "SEQ", "PARENT", "CREATED", "EXPIRES", "SIZE"],
            rows,
            right={1, 5},
            indent="  ",
        )


def _sessions_delete(args: argparse.Namespace) -> int:
    with _ledger(args) as ledger:
        for id in args.ids:
            record = ledger.sessions.get(id)
            ledger.sessions.delete(id)
            _say(
                f"deleted session {id} ({_count(record.message_count, 'message')}, "
                f"{_count(record.step_count, 'step')}, with its grants and checkpoints)"
            )
    return EXIT_OK


# --- export, import, copy ----------------------------------------------------------------------


def _export(args: argparse.Namespace) -> int:
    selection = _selection(args)
    with _ledger(args) as ledger, _progress("export") as progress:
        if args.output:
            report = transfer.export_jsonl(
                ledger, args.output, batch=args.batch, progress=progress, **selection
            )
        else:
            report = transfer.export_jsonl(
                ledger, sys.stdout, batch=args.batch, progress=progress, **selection
            )
            sys.stdout.flush()
    counts = ", ".join(_count(count, name[:-1]) for name, count in report.rows.items())
    where = f" to {report.destination}" if report.destination else ""
    line = f"exported {counts}{where}"
    if args.output:
        _say(line)
    else:
        print(line, file=sys.stderr)
    return EXIT_OK


def _import(args: argparse.Namespace) -> int:
    source: transfer.Source = sys.stdin.buffer if args.file == "-" else args.file
    if args.file != "-" and not os.path.isfile(args.file):
        raise _Usage(f"no file {args.file!r} to import")
    with _ledger(args) as ledger, _progress("import") as progress:
        report = transfer.import_jsonl(ledger, source, batch=args.batch, progress=progress)
    return _report(report)


def _copy(args: argparse.Namespace) -> int:
    selection = _selection(args)
    source_url = _checked_url(args.source)
    target_url = _checked_url(args.target)
    with (
        _open(source_url, args.from_schema) as source,
        _open(target_url, args.to_schema) as target,
        _progress("copy") as progress,
    ):
        report = transfer.copy_ledger(
            source, target, batch=args.batch, progress=progress, **selection
        )
    return _report(report)


def _report(report: transfer.ImportReport) -> int:
    header = ["", "INSERTED", "UNCHANGED", "CONFLICTING", "SKIPPED"]
    rows = [
        [name, str(c.inserted), str(c.unchanged), str(c.conflicting), str(c.skipped)]
        for name, c in report.tables.items()
    ]
    _table(header, rows, right={1, 2, 3, 4})
    for conflict in report.conflicts:
        where = f"line {conflict.line}: " if conflict.line is not None else ""
        _warn(
            f"conflict: {where}{conflict.key} is stored with other {', '.join(conflict.columns)}; "
            "the stored row was kept"
        )
    more = report.conflict_count - len(report.conflicts)
    if more:
        _warn(f"conflict: ... and {more} more")
    return EXIT_CONFLICTS if report.conflict_count else EXIT_OK


def _selection(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "session_ids": args.sessions,
        "app_name": args.app,
        "user_id": args.user,
        "updated_since": _since(args.since) if args.since else None,
    }


def _since(value: str) -> datetime:
    duration = _duration(value, strict=False)
    if duration is not None:
        return datetime.now(UTC) - duration
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise _Usage(
            f"--since takes a duration (7d, 12h) or an ISO date or time, got {value!r}"
        ) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _duration(value: str, *, strict: bool = True) -> timedelta | None:
    match = _DURATION.fullmatch(value.strip())
    if match is None:
        if strict:
            raise _Usage(f"expected a duration such as 30d, 12h or 2w, got {value!r}")
        return None
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


# --- purge ---------------------------------------------------------------------------------


def _purge(args: argparse.Namespace) -> int:
    rules = {
        "older_than": _duration(args.older_than) if args.older_than else None,
        "expired_checkpoints": args.checkpoints_expired,
        "keep_checkpoints": args.keep_checkpoints,
        "app_name": args.app,
        "user_id": args.user,
    }
    has_rule = args.older_than or args.checkpoints_expired or args.keep_checkpoints is not None
    if not has_rule and not args.vacuum:
        raise _Usage(
            "say what to purge: --older-than AGE, --checkpoints-expired, --keep-checkpoints K "
            "(or --vacuum alone)"
        )
    if args.vacuum and args.dry_run:
        raise _Usage("--vacuum changes the file; leave it out of a --dry-run")
    url = _url(args)
    sqlite = resolve_url(url, asynchronous=False).get_backend_name() == "sqlite"
    if args.vacuum and not sqlite:
        raise _Usage("--vacuum is for SQLite; PostgreSQL and MariaDB reuse freed space themselves")
    with _ledger(args) as ledger:
        if has_rule:
            _purge_rules(ledger, args, rules, url, sqlite)
        if args.vacuum:
            done = retention.vacuum(ledger)
            _say(f"vacuum: the file went from {_bytes(done.before)} to {_bytes(done.after)}")
    return EXIT_OK


def _purge_rules(
    ledger: Ledger, args: argparse.Namespace, rules: dict[str, Any], url: str, sqlite: bool
) -> None:
    listing = args.dry_run or args.verbose
    with _progress("purge", unit="deleted", enabled=not listing) as progress:
        count = 0

        def on_item(item: retention.PurgeItem) -> None:
            nonlocal count
            count += 1
            if listing:
                _say(_purge_line(item))
            elif progress is not None:
                progress(transfer.Progress(done=count, total=None, unit="rows"))

        run = retention.plan_purge if args.dry_run else retention.purge
        report = run(ledger, batch=args.batch, on_item=on_item, **rules)
    what = (
        f"{_count(report.sessions, 'session')} ({_count(report.messages, 'message')}, "
        f"{_count(report.steps, 'step')}) and "
        f"{_count(report.checkpoints, 'checkpoint')}"
    )
    if not report.applied:
        _say(f"dry run: would delete {what}; nothing was changed")
        return
    _say(f"deleted {what}")
    free = report.sqlite_free_bytes or 0
    if sqlite and free >= 1024 * 1024 and not args.vacuum:
        _say(
            f"SQLite keeps the {_bytes(free)} freed inside the file; to give it back to the "
            f"disk run: agentledger purge --vacuum --url '{mask(url)}' (VACUUM)"
        )


def _purge_line(item: retention.PurgeItem) -> str:
    if item.kind == "session":
        title = f"  {_shorten(_clean(item.title), TITLE_WIDTH)}" if item.title else ""
        return (
            f"session     {item.id}  {item.reason}  updated {format_time(item.at)}  "
            f"{_count(item.messages, 'message')}, {_count(item.steps, 'step')}{title}"
        )
    expires = format_time(item.expires_at) if item.expires_at else "never"
    return (
        f"checkpoint  {item.id}  {item.reason}  session {item.session_id} seq {item.seq}  "
        f"created {format_time(item.at)}  expires {expires}  {_bytes(item.size or 0)}"
    )


# --- ledgers and URLs ----------------------------------------------------------------------


@contextmanager
def _ledger(args: argparse.Namespace) -> Iterator[Ledger]:
    url = _url(args)
    with _open(_checked_url(url), _schema(args, url)) as ledger:
        yield ledger


@contextmanager
def _open(url: str, schema: str | None) -> Iterator[Ledger]:
    if schema is not None:
        try:
            validate_schema(schema, resolve_url(url, asynchronous=False).get_backend_name())
        except SchemaError as exc:
            raise _Usage(_one_line(exc)) from exc
    ledger = Ledger(url, schema=schema)
    try:
        yield ledger
    finally:
        ledger.close()


def _checked_url(url: str) -> str:
    """The URL, refused before any I/O when it is unusable, or names a SQLite file that
    does not exist (connecting would create an empty one)."""
    resolved = resolve_url(url, asynchronous=False)
    path = resolved.database
    if (
        resolved.get_backend_name() == "sqlite"
        and path
        and path != ":memory:"
        and not path.startswith("file:")
        and not os.path.exists(path)
    ):
        raise SchemaError(
            f"there is no SQLite database at {path} (agentledger's tables are missing)",
            head=migrations.head(),
            hint=f"{migrations.upgrade_hint(url)} creates it; or pass --url, or set "
            "AGENTLEDGER_DATABASE_URL, to use another database",
        )
    return url


# --- output helpers --------------------------------------------------------------------------


class _ProgressLine:
    """A one-line progress display on a terminal's stderr, redrawn at most 10 times a second."""

    def __init__(self, label: str, stream: IO[str], unit: str | None) -> None:
        self._label = label
        self._stream = stream
        self._unit = unit
        self._last = 0.0
        self._drawn = False

    def __call__(self, progress: transfer.Progress) -> None:
        now = time.monotonic()
        if now - self._last < 0.1:
            return
        self._last = now
        self._stream.write(f"\r{self._label}: {self._text(progress)}\x1b[K")
        self._stream.flush()
        self._drawn = True

    def _text(self, progress: transfer.Progress) -> str:
        unit = self._unit or progress.unit
        if progress.unit == "bytes":
            done = _bytes(progress.done)
            total = f" of {_bytes(progress.total)}" if progress.total else ""
            return f"{done}{total}" + _percent(progress)
        total = f"/{progress.total:,}" if progress.total is not None else ""
        return f"{progress.done:,}{total} {unit}" + _percent(progress)

    def close(self) -> None:
        if self._drawn:
            self._stream.write("\r\x1b[K")
            self._stream.flush()


def _percent(progress: transfer.Progress) -> str:
    if not progress.total:
        return ""
    return f"  {min(100, progress.done * 100 // progress.total)}%"


@contextmanager
def _progress(
    label: str, *, unit: str | None = None, enabled: bool = True
) -> Iterator[Callable[[transfer.Progress], None] | None]:
    """A progress callback drawing on stderr when it is a terminal, else None."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    line = _ProgressLine(label, sys.stderr, unit)
    try:
        yield line
    finally:
        line.close()


def _warn(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr)


def _table(
    header: list[str], rows: list[list[str]], *, right: set[int] | None = None, indent: str = ""
) -> None:
    right = right or set()
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def render(cells: list[str]) -> str:
        parts = [
            cell.rjust(width) if index in right else cell.ljust(width)
            for index, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ]
        return (indent + "  ".join(parts)).rstrip()

    _say(render(header))
    for row in rows:
        _say(render(row))


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _shown(shown: int, total: int, which: str) -> str:
    return f" ({which} {shown:,} shown)" if shown < total else ""


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False)


def _clean(text: str | None) -> str:
    """Text safe to print on a terminal: control characters (escape sequences) shown
    as escapes, never interpreted."""
    if not text:
        return text or ""
    return _CONTROL.sub(lambda match: repr(match.group())[1:-1], text)


def _shorten(text: str, width: int) -> str:
    text = " ".join(text.split()) if width < 100 else text
    return text if len(text) <= width else text[: width - 1] + "…"


def _when(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _bytes(count: int) -> str:
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"  # pragma: no cover
