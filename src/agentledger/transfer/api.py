"""``ledger.transfer``: export to JSON Lines, import, and copy between databases.

Written once, as sync code on the ledger's own transactions and repositories
(``RowRepository``); ``AsyncTransfer`` hands each call to it in one greenlet hop, and
file I/O goes to a worker thread there (see ``files``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from .. import migrations
from .._checks import bounded_int
from .._concurrency import in_greenlet, spawn
from .._host import AsyncHost, Host
from ..clock import format_time
from ..engine import same_database
from ..errors import ValidationError
from ..records import SessionSelection
from ..repositories._portable import BY_KIND, SPECS, TableSpec, to_file
from ..repositories.rows import BATCH_BYTES, RowRepository
from .applier import Applier, Commit, Incoming
from .files import (
    ADDED_IN_2,
    END_KEY,
    FORMAT_VERSION,
    HEADER_KEY,
    Destination,
    Source,
    check_header,
    decode_line,
    line,
    read_lines,
    written,
)
from .reader import Pages
from .reports import ExportReport, ImportReport, Progress, ProgressCallback

DEFAULT_BATCH = 1000
MAX_BATCH = 10_000


class Transfer:
    """Export, import and copy of one ledger's rows, every table, streamed in pages of
    whole sessions: memory stays the same whatever the size of the database.

    **The export format** (version 4) is UTF-8 JSON Lines, one JSON object per line,
    each with a single key naming what the line holds: first the header
    ``{"agentledger_export": {"version": 4, "schema_revision": ..., "exported_at": ...,
    "source": "sqlite", "selection": {...}}}``; then, page by page, the page's
    ``session`` lines followed by its ``message``, ``step``, ``grant``, ``checkpoint``,
    ``langgraph_checkpoint``, ``langgraph_blob`` and ``langgraph_write`` lines (every
    row after its session's line); after every session, the ``app_state`` and
    ``user_state`` lines (all of them, or those of the app or user selected; none when
    sessions are selected by id) and the ``memory_item`` lines (all of them, or none
    when sessions are selected by id, app or user: memories belong to none); last, the
    end line with the count of each kind, ``{"end": {"sessions": 2, ...}}``. A file
    without it was cut short, and nothing of it is imported. A row's keys are its
    table's column names, except
    database-local surrogate ids and the derived ``capability_hash`` and
    ``external_key_hash``; JSON columns hold JSON values (not text); binary columns
    (LangGraph's serialized values) base64 text; times are ISO 8601 UTC with
    microseconds (``2026-01-02T03:04:05.000006Z``). A version 1 file (before app and
    user state and the ``external_key`` columns), a version 2 file (before
    LangGraph's tables) and a version 3 file (before memory items) still import.
    """

    def __init__(self, ledger: Host) -> None:
        self._ledger = ledger

    def export_jsonl(
        self,
        destination: Destination,
        *,
        selection: SessionSelection | None = None,
        batch: int = DEFAULT_BATCH,
        progress: ProgressCallback | None = None,
    ) -> ExportReport:
        """Write the ledger's rows (every table) to ``destination`` as JSON Lines.

        Reads one snapshot, page by page, in constant memory. Without a ``selection``,
        everything; with one, the sessions it picks and all their rows. A path is written
        under a temporary name and renamed when complete; a ``.gz`` path is compressed.

        Raises:
            SchemaError: the database is not at this package's head.
            CorruptRecordError: a stored JSON value does not decode (never skipped).
        """
        selection = _selection(selection)
        size = bounded_int(batch, "batch", low=1, high=MAX_BATCH)
        ledger = self._ledger
        with (
            written(destination, ledger._waits) as (out, name),
            ledger._transaction(writes=False, snapshot=True) as work,
        ):
            pages = Pages(RowRepository(work), selection, size)
            total = pages.total() if progress is not None else None
            out.write(line(HEADER_KEY, self._header(selection)))
            rows = {spec.plural: 0 for spec in SPECS}
            done = 0
            for spec, batch_rows in pages.batches():
                out.write("".join(line(spec.kind, to_file(spec, row)) for row in batch_rows))
                rows[spec.plural] += len(batch_rows)
                done += len(batch_rows)
                if progress is not None:
                    progress(Progress(done=done, total=total, unit="rows"))
            out.write(line(END_KEY, rows))
        return ExportReport(rows=rows, destination=name)

    def _header(self, selection: SessionSelection) -> dict[str, Any]:
        return {
            "version": FORMAT_VERSION,
            "schema_revision": migrations.head(),
            "exported_at": format_time(self._ledger.settings.now()),
            "source": self._ledger.engine.dialect.name,
            "selection": {
                "session_ids": list(selection.session_ids)
                if selection.session_ids is not None
                else None,
                "app_name": selection.app_name,
                "user_id": selection.user_id,
                "updated_since": format_time(selection.updated_since)
                if selection.updated_since
                else None,
                "updated_before": format_time(selection.updated_before)
                if selection.updated_before
                else None,
            },
        }

    def import_jsonl(
        self,
        source: Source,
        *,
        batch: int = DEFAULT_BATCH,
        progress: ProgressCallback | None = None,
    ) -> ImportReport:
        """Import an export: insert the rows that are missing, leave identical ones alone,
        report the ones stored with other values (and keep the stored ones).

        Importing the same file twice changes nothing. The file is one transaction, all
        or nothing: every row is checked by the API's rules (and each session's counters
        against the rows that follow it) before the commit, so a refused file, or one
        cut short, leaves the database as it was.

        Raises:
            ValidationError: the file is not an export this package reads, or a line is
                not a valid row (named by its line number); nothing is imported.
            SchemaError: the database is not at this package's head.
        """
        size = bounded_int(batch, "batch", low=1, high=MAX_BATCH)
        applier = self._applier()
        try:
            with read_lines(source, self._ledger._waits) as (lines, total):
                _Importer(applier, size, progress, total).run(lines)
            applier.finish()
        except BaseException as error:
            applier.abort(error)
            raise
        return applier.report()

    def copy_to(
        self,
        target: Host,
        *,
        selection: SessionSelection | None = None,
        batch: int = DEFAULT_BATCH,
        progress: ProgressCallback | None = None,
        commit: Commit = "all",
    ) -> ImportReport:
        """Copy every row (or the rows of the sessions ``selection`` picks) of this
        ledger to ``target``.

        Reads one snapshot of this ledger in constant memory; checks and matches rows as
        ``import_jsonl`` does. With ``commit="all"`` it writes in one transaction, so a
        row the target cannot take (named by its table and key) leaves the target as
        it was; with ``commit="page"`` each page of whole sessions is committed on its
        own, and an interrupted copy run again skips what is there and ends with
        exactly one copy of every row.

        Raises:
            ValidationError: source and target are the same database; a source row
                breaks a rule (nothing is copied).
            SchemaError: either database is not at this package's head.
        """
        selection = _selection(selection)
        size = bounded_int(batch, "batch", low=1, high=MAX_BATCH)
        source = self._ledger
        if source.settings.schema == target.settings.schema and same_database(
            source.settings.url, target.settings.url
        ):
            raise ValidationError(
                "the source and the target are the same database: copy needs two", path="target"
            )
        if commit not in ("all", "page"):
            raise ValidationError(f"commit takes 'all' or 'page', got {commit!r}", path="commit")
        applier = Transfer(target)._applier(commit)
        try:
            with source._transaction(writes=False, snapshot=True) as work:
                pages = Pages(RowRepository(work), selection, size)
                total = pages.total() if progress is not None else None
                done = 0
                for spec, rows in pages.batches():
                    applier.feed(spec, [(None, row) for row in rows])
                    done += len(rows)
                    if progress is not None:
                        progress(Progress(done=done, total=total, unit="rows"))
            applier.finish()
        except BaseException as error:
            applier.abort(error)
            raise
        return applier.report()

    def _applier(self, commit: Commit = "all") -> Applier:
        ledger = self._ledger
        return Applier(lambda: ledger._transaction(writes=True), ledger.settings.limits, commit)


def _selection(selection: object) -> SessionSelection:
    if selection is None:
        return SessionSelection()
    if not isinstance(selection, SessionSelection):
        raise ValidationError(
            f"selection must be a SessionSelection, got {type(selection).__name__}",
            path="selection",
        )
    return selection


class _Importer:
    """Reads an export line by line and feeds the applier batches of one kind."""

    def __init__(
        self, applier: Applier, batch: int, progress: ProgressCallback | None, total: int | None
    ) -> None:
        self._applier = applier
        self._batch = batch
        self._progress = progress
        self._total = total
        self._pending: list[Incoming] = []
        self._pending_spec: TableSpec | None = None
        self._pending_bytes = 0
        self._read = 0
        self._added: dict[str, dict[str, Any]] = {}
        self.seen = {spec.plural: 0 for spec in SPECS}

    def run(self, lines: Iterable[bytes | str]) -> None:
        numbered: Iterator[tuple[int, bytes | str]] = enumerate(lines, start=1)
        first = next(numbered, None)
        header = check_header(None if first is None else first[1])
        if header["version"] < 2:
            self._added = ADDED_IN_2
        self._read = 0 if first is None else len(first[1])
        end: Any = None
        for number, text in numbered:
            self._read += len(text)
            if end is not None:
                if text.strip():
                    raise ValidationError(f"line {number}: more lines after the end line")
                continue
            key, data = decode_line(text, number)
            if key == END_KEY:
                self._flush()
                end = data
                continue
            spec = BY_KIND.get(key)
            if spec is None:
                raise ValidationError(f"line {number}: unknown kind {key!r}")
            self._add(spec, number, data, len(text))
        self._flush()
        self._check_end(end)

    def _add(self, spec: TableSpec, number: int, data: Any, size: int) -> None:
        added = self._added.get(spec.kind)
        if added is not None and type(data) is dict:
            data = {**added, **data}
        full = len(self._pending) >= self._batch or self._pending_bytes >= BATCH_BYTES
        if spec is not self._pending_spec or full:
            self._flush()
            self._pending_spec = spec
        self._pending.append((number, data))
        self._pending_bytes += size
        self.seen[spec.plural] += 1

    def _flush(self) -> None:
        if self._pending_spec is None or not self._pending:
            return
        self._applier.feed(self._pending_spec, self._pending)
        self._pending, self._pending_bytes = [], 0
        if self._progress is not None:
            self._progress(Progress(done=self._read, total=self._total, unit="bytes"))

    def _check_end(self, end: Any) -> None:
        if end is None:
            raise ValidationError(
                "the file ends without its end line: it was cut short (an interrupted "
                "export or copy?); nothing of it was imported"
            )
        if type(end) is not dict:
            raise ValidationError(f"the end line must hold an object of counts, got {end!r}")
        # A format 1 file counts no app or user state.
        seen = {kind: count for kind, count in self.seen.items() if count or kind in end}
        if end != seen:
            raise ValidationError(
                f"the end line counts {end} rows but the file holds {self.seen}: lines are "
                "missing or were added; nothing of it was imported"
            )


class AsyncTransfer:
    """``ledger.transfer`` on the async API: each call is handed to the sync ``Transfer``
    in one greenlet hop (file I/O runs in a worker thread, off the event loop)."""

    def __init__(self, proxied: Transfer) -> None:
        self._proxied = proxied
        self._run = in_greenlet

    # --- async proxies of Transfer via _proxied: export_jsonl, import_jsonl ---
    # (generated by tools/generate_async.py; do not edit by hand)
    async def export_jsonl(
        self,
        destination: Destination,
        *,
        selection: SessionSelection | None = None,
        batch: int = DEFAULT_BATCH,
        progress: ProgressCallback | None = None,
    ) -> ExportReport:
        """Write the ledger's rows (every table) to ``destination`` as JSON Lines.

        Reads one snapshot, page by page, in constant memory. Without a ``selection``,
        everything; with one, the sessions it picks and all their rows. A path is written
        under a temporary name and renamed when complete; a ``.gz`` path is compressed.

        Raises:
            SchemaError: the database is not at this package's head.
            CorruptRecordError: a stored JSON value does not decode (never skipped).
        """
        return await self._run(
            self._proxied.export_jsonl,
            destination,
            selection=selection,
            batch=batch,
            progress=progress,
        )

    async def import_jsonl(
        self,
        source: Source,
        *,
        batch: int = DEFAULT_BATCH,
        progress: ProgressCallback | None = None,
    ) -> ImportReport:
        """Import an export: insert the rows that are missing, leave identical ones alone,
        report the ones stored with other values (and keep the stored ones).

        Importing the same file twice changes nothing. The file is one transaction, all
        or nothing: every row is checked by the API's rules (and each session's counters
        against the rows that follow it) before the commit, so a refused file, or one
        cut short, leaves the database as it was.

        Raises:
            ValidationError: the file is not an export this package reads, or a line is
                not a valid row (named by its line number); nothing is imported.
            SchemaError: the database is not at this package's head.
        """
        return await self._run(self._proxied.import_jsonl, source, batch=batch, progress=progress)

    # --- end of async proxies ---

    async def copy_to(
        self,
        target: AsyncHost,
        *,
        selection: SessionSelection | None = None,
        batch: int = DEFAULT_BATCH,
        progress: ProgressCallback | None = None,
        commit: Commit = "all",
    ) -> ImportReport:
        """Copy every row (or the rows of the sessions ``selection`` picks) of this
        ledger to ``target`` (an AsyncLedger), as ``Transfer.copy_to`` does."""
        return await spawn(
            self._proxied.copy_to,
            target.sync_ledger,
            selection=selection,
            batch=batch,
            progress=progress,
            commit=commit,
        )
