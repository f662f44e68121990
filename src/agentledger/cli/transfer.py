"""``agentledger export``, ``import`` and ``copy``: JSON Lines in and out, and database to
database, over ``agentledger.transfer``."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime

from .. import transfer
from ..records import SessionSelection
from .common import (
    EXIT_CONFLICTS,
    EXIT_OK,
    Groups,
    UsageError,
    add_batch,
    add_connection_options,
    add_reader_option,
    add_timeout_options,
    existing_database,
    ledger_of,
    open_ledger,
    parse_duration,
    timeouts_of,
)
from .output import count, progress_line, say, table, warn


def add_transfer_groups(groups: Groups) -> None:
    """Add ``export``, ``import`` and ``copy``."""
    export = groups.add_parser(
        "export",
        help="write every table to JSON Lines",
        description="Export sessions with all their rows as JSON Lines (format version "
        f"{transfer.FORMAT_VERSION}: a header line, one line per row, an end line). "
        "One snapshot, streamed in constant memory.",
    )
    add_connection_options(export)
    add_reader_option(export)
    add_timeout_options(export)
    _add_selection(export)
    export.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write to FILE (.gz compresses) instead of stdout (-: stdout)",
    )
    add_batch(export, transfer.DEFAULT_BATCH)
    export.set_defaults(handler=_export)

    load = groups.add_parser(
        "import",
        help="import an export file (idempotent)",
        description="Insert the rows of an export that are missing; rows already stored "
        "with the same values are left alone, rows stored with other values are "
        "reported and kept (exit 5). Importing twice changes nothing.",
    )
    add_connection_options(load)
    add_timeout_options(load)
    load.add_argument("file", metavar="FILE", help="an export (gzip is detected); - reads stdin")
    add_batch(load, transfer.DEFAULT_BATCH)
    load.set_defaults(handler=_import)

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
    copy.add_argument(
        "--commit",
        choices=("all", "page"),
        default="all",
        help="all: one transaction, nothing copied if a row is refused (default); "
        "page: commit each page, so an interrupted copy run again goes on from there",
    )
    copy.add_argument("--from-schema", metavar="NAME", help="source PostgreSQL schema")
    copy.add_argument("--to-schema", metavar="NAME", help="target PostgreSQL schema")
    add_timeout_options(copy)
    _add_selection(copy)
    add_batch(copy, transfer.DEFAULT_BATCH)
    copy.set_defaults(handler=_copy)


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


def _selection(args: argparse.Namespace) -> SessionSelection:
    """The sessions an export or a copy carries."""
    return SessionSelection(
        session_ids=args.sessions,
        app_name=args.app,
        user_id=args.user,
        updated_since=_since(args.since) if args.since else None,
    )


def _since(value: str) -> datetime:
    duration = parse_duration(value)
    if duration is not None:
        return datetime.now(UTC) - duration
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(
            f"--since takes a duration (7d, 12h) or an ISO date or time, got {value!r}"
        ) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


# --- the commands -------------------------------------------------------------------------


def _export(args: argparse.Namespace) -> int:
    if args.output == "-":
        args.output = None
    selection = _selection(args)
    destination: transfer.Destination = args.output or sys.stdout
    with ledger_of(args) as ledger, progress_line("export") as progress:
        report = ledger.transfer.export_jsonl(
            destination, selection=selection, batch=args.batch, progress=progress
        )
    counts = ", ".join(count(number, name[:-1]) for name, number in report.rows.items())
    where = f" to {report.destination}" if report.destination else ""
    line = f"exported {counts}{where}"
    if args.output:
        say(line)
    else:
        sys.stdout.flush()
        print(line, file=sys.stderr)
    return EXIT_OK


def _import(args: argparse.Namespace) -> int:
    source: transfer.Source = sys.stdin.buffer if args.file == "-" else args.file
    if args.file != "-" and not os.path.isfile(args.file):
        raise UsageError(f"no file {args.file!r} to import")
    with ledger_of(args) as ledger, progress_line("import") as progress:
        report = ledger.transfer.import_jsonl(source, batch=args.batch, progress=progress)
    return _report(report)


def _copy(args: argparse.Namespace) -> int:
    selection = _selection(args)
    source_url = existing_database(args.source, option="--from")
    target_url = existing_database(args.target, option="--to")
    with (
        open_ledger(source_url, args.from_schema, **timeouts_of(args)) as source,
        open_ledger(target_url, args.to_schema, **timeouts_of(args)) as target,
        progress_line("copy") as progress,
    ):
        report = source.transfer.copy_to(
            target, selection=selection, batch=args.batch, progress=progress, commit=args.commit
        )
    return _report(report)


def _report(report: transfer.ImportReport) -> int:
    """The counts of an import or copy as a table, each conflict a line on stderr."""
    header = ["", "INSERTED", "UNCHANGED", "CONFLICTING", "SKIPPED"]
    rows = [
        [name, str(c.inserted), str(c.unchanged), str(c.conflicting), str(c.skipped)]
        for name, c in report.tables.items()
    ]
    table(header, rows, right={1, 2, 3, 4})
    for conflict in report.conflicts:
        where = f"line {conflict.line}: " if conflict.line is not None else ""
        warn(
            f"conflict: {where}{conflict.key} is stored with other {', '.join(conflict.columns)}; "
            "the stored row was kept"
        )
    more = report.conflict_count - len(report.conflicts)
    if more:
        warn(f"conflict: ... and {more} more")
    return EXIT_CONFLICTS if report.conflict_count else EXIT_OK
