"""Export to JSON Lines, import, and copy between databases: every table, streamed.

All three read and write in pages of whole sessions, with keyset paging by primary
key and seq, so memory stays the same whatever the size of the database.

**The export format** (version 2) is UTF-8 JSON Lines, one JSON object per line, each
with a single key naming what the line holds:

- line 1, the header: ``{"agentledger_export": {"version": 2, "schema_revision": ...,
  "exported_at": ..., "source": "sqlite", "selection": {...}}}``;
- one line per row: ``{"session": {...}}``, then that page's ``message``, ``step``,
  ``grant`` and ``checkpoint`` lines. Every row comes after its session's line. The
  keys of a row are its table's column names, except database-local surrogate ids
  and the derived ``capability_hash`` and ``external_key_hash``; JSON columns hold JSON
  values (not text), times are ISO 8601 UTC with microseconds
  (``2026-01-02T03:04:05.000006Z``);
- after every session, the ``app_state`` and ``user_state`` lines (version 2): all of
  them, or those of the ``app_name`` / ``user_id`` selected (changed since
  ``updated_since``); none when sessions are selected by id;
- last, the end line with the count of each kind: ``{"end": {"sessions": 2, ...}}``.
  A file without it was cut short, and its last page is not imported.

A version 1 file (before app and user state and the ``external_key`` columns) still
imports: its sessions, messages and steps get no external key.

**Import** matches rows on their natural keys (a session's id, a message's or step's
(session, seq), a grant's (session, capability), a checkpoint's ref, an app state's
app_name, a user state's (app_name, user_id)). A row that is
not there is inserted; one that is there with the same values is left alone, so
importing twice changes nothing; one that is there with other values is a conflict:
it is reported and the stored row is kept. A session that conflicts is skipped whole,
with all its rows: merging two histories of one session would break its seq counters.
Each page of whole sessions is one transaction.

**Copy** is an import fed straight from another database: it reads one snapshot of
the source, and an interrupted copy started again skips what is already there and
finishes with exactly one copy of every row.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any, Literal

from sqlalchemy import ColumnElement, Row, and_, func, insert, or_, select
from sqlalchemy.engine import URL

from . import migrations
from ._checks import scope_value
from ._dialects import json_from_text
from ._json import check_json
from ._portable import (
    BY_KIND,
    CHECKPOINTS,
    CHILDREN,
    SCOPED,
    SESSIONS,
    SPECS,
    TableSpec,
    checked,
    differing,
    format_time,
    from_database,
    to_file,
)
from ._stores import Store, open_async_store, open_store, run_in_greenlet
from ._translate import translated
from .clock import utc
from .errors import ValidationError
from .ids import validate_id
from .records import Record
from .repositories._base import Work

if TYPE_CHECKING:
    from .ledger import AsyncLedger, Ledger

FORMAT_VERSION = 2
"""The export format this package writes and the newest it reads."""
ADDED_IN_2 = {kind: {"external_key": None} for kind in ("session", "message", "step")}
"""Columns format 2 added to rows of format 1, with the value a format 1 row means."""
HEADER_KEY = "agentledger_export"
END_KEY = "end"
DEFAULT_BATCH = 1000
MAX_BATCH = 10_000
PAGE_SESSIONS = 500
"""At most this many sessions per page (one transaction on import and copy)."""
PAGE_ROWS = 20_000
"""A page ends before the session that would take it past this many rows (estimated
from the session's counters); a larger session is a page of its own."""
BATCH_BYTES = 16 * 1024 * 1024
"""Checkpoints are read, and import lines grouped, at most this many bytes at a time."""
MAX_REPORTED_CONFLICTS = 1000

Destination = str | os.PathLike[str] | IO[str]
"""Where an export goes: a path (``.gz`` compresses) or an open text stream."""
Source = str | os.PathLike[str] | IO[bytes] | IO[str]
"""What an import reads: a path (gzip is detected) or an open stream."""


class Progress(Record):
    """How far a long operation is: ``done`` of ``total`` (None when unknown) ``unit``."""

    done: int
    total: int | None
    unit: Literal["rows", "bytes"]


ProgressCallback = Callable[[Progress], None]
"""Called after each batch; raising from it stops the operation (what was committed
stays, and running it again picks up from there)."""


class ExportReport(Record):
    """What an export wrote: the rows of each table, by plural kind (``sessions``...)."""

    rows: dict[str, int]
    destination: str | None
    """The file written, or None for a stream."""


class Conflict(Record):
    """A row that is stored with other values than the one imported; the stored row was
    kept. ``columns`` are the columns that differ."""

    kind: str
    key: str
    columns: list[str]
    line: int | None
    """The line of the import file, or None for a copy."""


class TableCounts(Record):
    """What happened to the imported rows of one table."""

    inserted: int = 0
    unchanged: int = 0
    """Already stored with the same values."""
    conflicting: int = 0
    """Stored with other values: reported in ``conflicts``, left as they were."""
    skipped: int = 0
    """Rows of a session that conflicted (skipped whole)."""


class ImportReport(Record):
    """What an import or a copy did, table by table (``sessions``, ``messages``...)."""

    tables: dict[str, TableCounts]
    conflicts: list[Conflict]
    """The first conflicts (up to 1,000); ``conflict_count`` has them all."""
    conflict_count: int

    @property
    def inserted(self) -> int:
        """Rows inserted, over every table."""
        return sum(counts.inserted for counts in self.tables.values())


# --- selection --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Selection:
    """Which sessions (with all their rows) an export or copy carries."""

    session_ids: tuple[str, ...] | None = None
    app_name: str | None = None
    user_id: str | None = None
    updated_since: datetime | None = None

    @classmethod
    def of(
        cls,
        session_ids: Sequence[str] | None,
        app_name: str | None,
        user_id: str | None,
        updated_since: datetime | None,
    ) -> _Selection:
        if isinstance(session_ids, str):
            raise ValidationError("session_ids takes a list of ids", path="session_ids")
        return cls(
            session_ids=None
            if session_ids is None
            else tuple(validate_id(value) for value in session_ids),
            app_name=scope_value(app_name, field="app_name"),
            user_id=scope_value(user_id, field="user_id"),
            updated_since=None
            if updated_since is None
            else utc(updated_since, field="updated_since"),
        )

    def scoped_conditions(self, spec: TableSpec) -> list[ColumnElement[bool]] | None:
        """The app or user state rows selected (None: none, when sessions are chosen by id)."""
        if self.session_ids is not None:
            return None
        table = spec.table
        found: list[ColumnElement[bool]] = []
        if self.app_name is not None:
            found.append(table.c.app_name == self.app_name)
        if self.user_id is not None:
            if "user_id" not in table.c:
                return None
            found.append(table.c.user_id == self.user_id)
        if self.updated_since is not None:
            found.append(table.c.updated_at >= self.updated_since)
        return found

    def conditions(self) -> list[ColumnElement[bool]]:
        table = SESSIONS.table
        found: list[ColumnElement[bool]] = []
        if self.session_ids is not None:
            found.append(table.c.id.in_(self.session_ids))
        if self.app_name is not None:
            found.append(table.c.app_name == self.app_name)
        if self.user_id is not None:
            found.append(table.c.user_id == self.user_id)
        if self.updated_since is not None:
            found.append(table.c.updated_at >= self.updated_since)
        return found

    def as_json(self) -> dict[str, Any]:
        return {
            "session_ids": list(self.session_ids) if self.session_ids is not None else None,
            "app_name": self.app_name,
            "user_id": self.user_id,
            "updated_since": format_time(self.updated_since) if self.updated_since else None,
        }


def _check_batch(batch: object) -> int:
    if not isinstance(batch, int) or isinstance(batch, bool) or not 1 <= batch <= MAX_BATCH:
        raise ValidationError(f"batch must be an int from 1 to {MAX_BATCH}", path="batch")
    return batch


# --- reading pages of whole sessions -------------------------------------------------------

Batch = tuple[TableSpec, list[dict[str, Any]]]


class _Reader:
    """Reads the selected sessions page by page, each page's rows table by table."""

    def __init__(self, work: Work, selection: _Selection, batch: int) -> None:
        self._work = work
        self._url: URL = work.settings.url
        self._selection = selection
        self._batch = batch

    def _rows(self, query: Any) -> list[Row[Any]]:
        with translated(self._url):
            return list(self._work.session.execute(query).all())

    def total(self) -> int:
        """Rows in the selection, every table (for progress only: a count reads them all)."""
        return sum(self.counts().values())

    def counts(self) -> dict[str, int]:
        """Rows of each table in the selection."""
        conditions = self._selection.conditions()
        chosen = select(SESSIONS.table.c.id).where(*conditions)
        counts = {}
        for spec in SPECS:
            query = select(func.count()).select_from(spec.table)
            if spec is SESSIONS:
                query = query.where(*conditions)
            elif spec in SCOPED:
                scoped = self._selection.scoped_conditions(spec)
                if scoped is None:
                    counts[spec.plural] = 0
                    continue
                query = query.where(*scoped)
            elif conditions:
                query = query.where(spec.table.c.session_id.in_(chosen))
            counts[spec.plural] = int(self._rows(query)[0][0])
        return counts

    def batches(self) -> Iterator[Batch]:
        """Every selected row: per page, its sessions, then each child table's rows;
        after the sessions, the app and user state."""
        for page in self._pages():
            yield SESSIONS, page
            ids = [row["id"] for row in page]
            for spec in CHILDREN:
                yield from ((spec, rows) for rows in self._children(spec, ids))
        for spec in SCOPED:
            yield from ((spec, rows) for rows in self._scoped(spec))

    def _scoped(self, spec: TableSpec) -> Iterator[list[dict[str, Any]]]:
        conditions = self._selection.scoped_conditions(spec)
        if conditions is None:
            return
        base = spec.select().where(*conditions).order_by(*spec.ordering())
        position: tuple[Any, ...] | None = None
        while True:
            query = base if position is None else base.where(spec.after(position))
            rows = self._rows(query.limit(self._batch))
            if rows:
                yield [from_database(spec, row) for row in rows]
            if len(rows) < self._batch:
                return
            position = tuple(rows[-1]._mapping[name] for name in spec.order)

    def _pages(self) -> Iterator[list[dict[str, Any]]]:
        table = SESSIONS.table
        query = SESSIONS.select().where(*self._selection.conditions()).order_by(table.c.id)
        limit = min(PAGE_SESSIONS, self._batch)
        after: str | None = None
        while True:
            rows = self._rows(
                (query if after is None else query.where(table.c.id > after)).limit(limit)
            )
            page: list[dict[str, Any]] = []
            budget = 0
            for row in rows:
                estimate = 1 + row.message_count + row.step_count + row.checkpoint_seq
                if page and budget + estimate > PAGE_ROWS:
                    break
                page.append(from_database(SESSIONS, row))
                budget += estimate
            if not page:
                return
            yield page
            if len(rows) < limit and len(page) == len(rows):
                return
            after = page[-1]["id"]

    def _children(self, spec: TableSpec, ids: list[str]) -> Iterator[list[dict[str, Any]]]:
        base = spec.select().where(spec.table.c.session_id.in_(ids)).order_by(*spec.ordering())
        if spec is CHECKPOINTS:
            yield from self._checkpoints(base, ids)
            return
        position: tuple[Any, ...] | None = None
        while True:
            query = base if position is None else base.where(spec.after(position))
            rows = self._rows(query.limit(self._batch))
            if rows:
                yield [from_database(spec, row) for row in rows]
            if len(rows) < self._batch:
                return
            position = tuple(rows[-1]._mapping[name] for name in spec.order)

    def _checkpoints(self, base: Any, ids: list[str]) -> Iterator[list[dict[str, Any]]]:
        """Checkpoints in groups of at most BATCH_BYTES of payload: their sizes are read
        first, since one payload may be megabytes."""
        table = CHECKPOINTS.table
        sizes = (
            select(table.c.ref, table.c.session_id, table.c.seq, table.c.size)
            .where(table.c.session_id.in_(ids))
            .order_by(*CHECKPOINTS.ordering())
        )
        position: tuple[Any, ...] | None = None
        while True:
            query = sizes if position is None else sizes.where(CHECKPOINTS.after(position))
            rows = self._rows(query.limit(self._batch))
            for group in _by_bytes(rows):
                found = self._rows(base.where(table.c.ref.in_([row.ref for row in group])))
                yield [from_database(CHECKPOINTS, row) for row in found]
            if len(rows) < self._batch:
                return
            position = (rows[-1].session_id, rows[-1].seq)


def _by_bytes(rows: list[Row[Any]]) -> Iterator[list[Row[Any]]]:
    group: list[Row[Any]] = []
    total = 0
    for row in rows:
        if group and total + row.size > BATCH_BYTES:
            yield group
            group, total = [], 0
        group.append(row)
        total += row.size
    if group:
        yield group


# --- writing: the applier shared by import and copy -------------------------------------

Incoming = tuple[int | None, dict[str, Any]]
"""A row to import: its line in the file (None for a copy) and its values."""


@dataclass
class _Counts:
    inserted: int = 0
    unchanged: int = 0
    conflicting: int = 0
    skipped: int = 0


@dataclass
class _Page:
    """The sessions of the current page and what became of them."""

    fresh: set[str] = field(default_factory=set)
    """Inserted in this page: their rows cannot be stored yet, so none is looked up."""
    kept: set[str] = field(default_factory=set)
    """Already stored with the same values: their rows are matched one by one."""
    skipped: set[str] = field(default_factory=set)
    """Stored with other values: skipped whole."""
    children_seen: bool = False


class _Applier:
    """Writes incoming rows to a store, one transaction per page of whole sessions."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._limits = store.settings.limits
        self._work: Work | None = None
        self._page = _Page()
        self.counts = {spec.plural: _Counts() for spec in SPECS}
        self.conflicts: list[Conflict] = []
        self.conflict_count = 0

    def feed(self, spec: TableSpec, rows: list[Incoming]) -> None:
        """Write one batch of one table's rows (a session batch after rows of other
        tables starts the next page: the current one is committed first)."""
        if spec is SESSIONS:
            if self._work is None or self._page.children_seen:
                self._next_page()
            self._sessions(rows)
            return
        if spec in SCOPED:
            if self._work is None:
                self._next_page()
            self._page.children_seen = True
            self._scoped(spec, rows)
            return
        if self._work is None:
            line = rows[0][0]
            raise ValidationError(f"{_where(line, spec)}: a {spec.kind} before any session")
        self._page.children_seen = True
        self._children(spec, rows)

    def finish(self) -> None:
        """Commit the last page."""
        if self._work is not None:
            work, self._work = self._work, None
            work.finish(failed=False)

    def abort(self) -> None:
        """Roll the current page back (pages before it stay committed)."""
        if self._work is not None:
            work, self._work = self._work, None
            work.finish(failed=True)

    def report(self) -> ImportReport:
        return ImportReport(
            tables={name: TableCounts(**vars(counts)) for name, counts in self.counts.items()},
            conflicts=list(self.conflicts),
            conflict_count=self.conflict_count,
        )

    def _next_page(self) -> None:
        self.finish()
        self._work = self._store.begin(writes=True)
        self._page = _Page()

    def _checked(
        self, spec: TableSpec, rows: list[Incoming]
    ) -> list[tuple[int | None, dict[str, Any]]]:
        result = []
        keys: set[tuple[Any, ...]] = set()
        for line, values in rows:
            where = _where(line, spec, values)
            row = checked(spec, values, where=where, limits=self._limits)
            key = spec.key_of(row)
            if key in keys:
                raise ValidationError(f"{where}: {spec.describe(key)} appears twice")
            keys.add(key)
            result.append((line, row))
        return result

    def _sessions(self, rows: list[Incoming]) -> None:
        incoming = self._checked(SESSIONS, rows)
        stored = self._stored(SESSIONS, [row for _, row in incoming])
        counts, page = self.counts[SESSIONS.plural], self._page
        new = []
        for line, row in incoming:
            id = row["id"]
            old = stored.get((id,))
            if old is None:
                new.append(row)
                page.fresh.add(id)
            elif columns := differing(SESSIONS, row, old):
                self._conflict(SESSIONS, (id,), columns, line)
                page.skipped.add(id)
            else:
                counts.unchanged += 1
                page.kept.add(id)
        self._insert(SESSIONS, new)

    def _children(self, spec: TableSpec, rows: list[Incoming]) -> None:
        counts, page = self.counts[spec.plural], self._page
        new, known = [], []
        for line, row in self._checked(spec, rows):
            session_id = row["session_id"]
            if session_id in page.skipped:
                counts.skipped += 1
            elif session_id in page.fresh:
                new.append(row)
            elif session_id in page.kept:
                known.append((line, row))
            else:
                raise ValidationError(
                    f"{_where(line, spec)}: a {spec.kind} of session {session_id!r} does not "
                    "follow that session's line"
                )
        stored = self._stored(spec, [row for _, row in known])
        clashes = self._seq_clashes([row for _, row in known]) if spec is CHECKPOINTS else {}
        for line, row in known:
            key = spec.key_of(row)
            old = stored.get(key)
            if old is not None:
                if columns := differing(spec, row, old):
                    self._conflict(spec, key, columns, line)
                else:
                    counts.unchanged += 1
            elif (row["session_id"], row["seq"]) in clashes:
                self._conflict(spec, key, ["ref"], line)
            else:
                new.append(row)
        self._insert(spec, new)

    def _scoped(self, spec: TableSpec, rows: list[Incoming]) -> None:
        """App or user state rows: each inserted, left alone or reported on its own."""
        incoming = self._checked(spec, rows)
        stored = self._stored(spec, [row for _, row in incoming])
        new = []
        for line, row in incoming:
            key = spec.key_of(row)
            old = stored.get(key)
            if old is None:
                new.append(row)
            elif columns := differing(spec, row, old):
                self._conflict(spec, key, columns, line)
            else:
                self.counts[spec.plural].unchanged += 1
        self._insert(spec, new)

    def _conflict(
        self, spec: TableSpec, key: tuple[Any, ...], columns: list[str], line: int | None
    ) -> None:
        self.counts[spec.plural].conflicting += 1
        self.conflict_count += 1
        if len(self.conflicts) < MAX_REPORTED_CONFLICTS:
            self.conflicts.append(
                Conflict(kind=spec.kind, key=spec.describe(key), columns=columns, line=line)
            )

    def _execute(self, statement: Any, parameters: Any = None) -> Any:
        assert self._work is not None
        with translated(self._store.url):
            return self._work.session.execute(statement, parameters)

    def _stored(
        self, spec: TableSpec, rows: list[dict[str, Any]]
    ) -> dict[tuple[Any, ...], dict[str, Any]]:
        """The stored rows with the natural keys of ``rows``, by key."""
        if not rows:
            return {}
        table = spec.table
        condition: ColumnElement[bool]
        if len(spec.key) == 1:
            column = table.c[spec.key[0]]
            condition = column.in_([row[spec.key[0]] for row in rows])
        else:
            first, second = spec.key
            condition = _grouped(table.c[first], table.c[second], rows, second, first)
        found = self._execute(spec.select().where(condition)).all()
        result = {}
        for raw in found:
            row = from_database(spec, raw)
            if spec.kind == "grant":
                row["capability_hash"] = raw.capability_hash
            result[spec.key_of(row)] = row
        return result

    def _seq_clashes(self, rows: list[dict[str, Any]]) -> set[tuple[str, int]]:
        """(session, seq) of checkpoints stored under another ref than the imported one."""
        if not rows:
            return set()
        table = CHECKPOINTS.table
        condition = _grouped(table.c.session_id, table.c.seq, rows, "seq")
        found = self._execute(select(table.c.ref, table.c.session_id, table.c.seq).where(condition))
        refs = {(row["session_id"], row["seq"]): row["ref"] for row in rows}
        return {
            (row.session_id, row.seq)
            for row in found
            if refs.get((row.session_id, row.seq)) not in (None, row.ref)
        }

    def _insert(self, spec: TableSpec, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        if spec is CHECKPOINTS:
            for row in rows:
                self._insert_checkpoint(row)
        else:
            self._execute(insert(spec.table), rows)
        self.counts[spec.plural].inserted += len(rows)

    def _insert_checkpoint(self, row: dict[str, Any]) -> None:
        """One checkpoint, its payload as the JSON text the checkpoint repository writes
        (see ``_dialects.json_from_text``: the default encoder could outgrow the limit)."""
        assert self._work is not None
        text = check_json(
            row["payload"],
            path="payload",
            limits=self._limits,
            max_bytes=self._limits.max_checkpoint_bytes,
        )
        values = {name: value for name, value in row.items() if name != "payload"}
        payload = json_from_text(self._work.session, text)
        self._execute(insert(CHECKPOINTS.table).values(payload=payload, **values))


def _grouped(
    session_column: Any,
    column: Any,
    rows: list[dict[str, Any]],
    name: str,
    session_name: str = "session_id",
) -> ColumnElement[bool]:
    """``(session = s1 AND col IN (...)) OR ...``: one indexed lookup per session (or
    per app, for user state)."""
    by_session: dict[str, list[Any]] = {}
    for row in rows:
        by_session.setdefault(row[session_name], []).append(row[name])
    return or_(
        *(
            and_(session_column == session_id, column.in_(values))
            for session_id, values in by_session.items()
        )
    )


def _where(line: int | None, spec: TableSpec, values: object = None) -> str:
    """``line 12`` in a file; in a copy, the source row by its key."""
    if line is not None:
        return f"line {line}"
    if isinstance(values, dict):
        names = ("session_id", "seq") if spec.kind != "checkpoint" else ("ref",)
        key = tuple(values.get(name) for name in (("id",) if spec is SESSIONS else names))
        return f"source {spec.table.name} row {key[0] if len(key) == 1 else key!r}"
    return f"source {spec.table.name}"


# --- export --------------------------------------------------------------------------------


_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})
"""Characters some readers take for line breaks (Python's str.splitlines, JavaScript):
escaped, so that a line of the file is a line for every tool."""


def _line(key: str, value: Any) -> str:
    text = json.dumps({key: value}, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.translate(_LINE_BREAKS) + "\n"


def _export(
    store: Store,
    destination: Destination,
    selection: _Selection,
    batch: int,
    progress: ProgressCallback | None,
) -> ExportReport:
    with (
        _writer(destination) as (out, name),
        store.transaction(writes=False, snapshot=True) as work,
    ):
        reader = _Reader(work, selection, batch)
        total = reader.total() if progress is not None else None
        header = {
            "version": FORMAT_VERSION,
            "schema_revision": migrations.head(),
            "exported_at": format_time(store.settings.now()),
            "source": store.dialect,
            "selection": selection.as_json(),
        }
        out.write(_line(HEADER_KEY, header))
        rows = {spec.plural: 0 for spec in SPECS}
        done = 0
        for spec, batch_rows in reader.batches():
            out.write("".join(_line(spec.kind, to_file(spec, row)) for row in batch_rows))
            rows[spec.plural] += len(batch_rows)
            done += len(batch_rows)
            if progress is not None:
                progress(Progress(done=done, total=total, unit="rows"))
        out.write(_line(END_KEY, rows))
    return ExportReport(rows=rows, destination=name)


@contextmanager
def _writer(destination: Destination) -> Iterator[tuple[IO[str], str | None]]:
    """An open text stream; a path is written under a temporary name and renamed when
    the export is complete, so a file of that name is never a partial export."""
    if not isinstance(destination, str | os.PathLike):
        yield destination, None
        return
    path = os.fspath(destination)
    partial = f"{path}.partial"
    opener: Callable[..., IO[str]] = gzip.open if path.endswith(".gz") else open
    try:
        with opener(partial, "wt", encoding="utf-8", newline="\n") as stream:
            yield stream, path
    except BaseException:
        if os.path.exists(partial):
            os.remove(partial)
        raise
    os.replace(partial, path)


# --- import --------------------------------------------------------------------------------


@contextmanager
def _reader(source: Source) -> Iterator[tuple[Iterable[bytes | str], int | None]]:
    """Lines of the source and its size in bytes, when known (a gzip file: None)."""
    if not isinstance(source, str | os.PathLike):
        yield source, None
        return
    with open(source, "rb") as raw:
        if raw.read(2) == b"\x1f\x8b":
            raw.seek(0)
            with gzip.open(raw, "rb") as unzipped:
                yield unzipped, None
                return
        raw.seek(0)
        yield raw, os.fstat(raw.fileno()).st_size


def _decode_line(text: bytes | str, line: int) -> tuple[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as error:
        raise ValidationError(f"line {line}: not JSON ({error})") from None
    if type(value) is not dict or len(value) != 1:
        raise ValidationError(
            f'line {line}: expected an object with one key, such as {{"session": {{...}}}}'
        )
    ((key, data),) = value.items()
    return key, data


def _check_header(text: bytes | str | None) -> dict[str, Any]:
    problem = (
        "not an agentledger export: its first line is not the header "
        f'{{"{HEADER_KEY}": {{"version": {FORMAT_VERSION}, ...}}}}'
    )
    if text is None:
        raise ValidationError(f"{problem} (the file is empty)")
    try:
        key, header = _decode_line(text, 1)
    except ValidationError:
        raise ValidationError(problem) from None
    if key != HEADER_KEY or type(header) is not dict:
        raise ValidationError(problem)
    version = header.get("version")
    if type(version) is not int or version < 1:
        raise ValidationError(
            f"line 1: the header's version must be a positive int, got {version!r}"
        )
    if version > FORMAT_VERSION:
        raise ValidationError(
            f"this export is format version {version}, newer than this agentledger reads "
            f"({FORMAT_VERSION}): upgrade agentledger to import it"
        )
    return header


class _Importer:
    """Reads an export line by line and feeds the applier batches of one kind."""

    def __init__(
        self, applier: _Applier, batch: int, progress: ProgressCallback | None, total: int | None
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
        numbered = enumerate(lines, start=1)
        first = next(numbered, None)
        header = _check_header(None if first is None else first[1])
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
            key, data = _decode_line(text, number)
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
                "export or copy?); every page before the last was imported, the last was not"
            )
        # A format 1 file counts no app or user state.
        seen = {kind: count for kind, count in self.seen.items() if count or kind in end}
        if end != seen:
            raise ValidationError(
                f"the end line counts {end} rows but the file holds {self.seen}: lines are missing"
            )


def _import(
    store: Store, source: Source, batch: int, progress: ProgressCallback | None
) -> ImportReport:
    applier = _Applier(store)
    try:
        with _reader(source) as (lines, size):
            _Importer(applier, batch, progress, size).run(lines)
        applier.finish()
    except BaseException:
        applier.abort()
        raise
    return applier.report()


# --- copy ----------------------------------------------------------------------------------


def _copy(
    source: Store,
    target: Store,
    selection: _Selection,
    batch: int,
    progress: ProgressCallback | None,
) -> ImportReport:
    if _same_database(source, target):
        raise ValidationError(
            "the source and the target are the same database: copy needs two", path="target"
        )
    applier = _Applier(target)
    try:
        with source.transaction(writes=False, snapshot=True) as work:
            reader = _Reader(work, selection, batch)
            total = reader.total() if progress is not None else None
            done = 0
            for spec, rows in reader.batches():
                applier.feed(spec, [(None, row) for row in rows])
                done += len(rows)
                if progress is not None:
                    progress(Progress(done=done, total=total, unit="rows"))
        applier.finish()
    except BaseException:
        applier.abort()
        raise
    return applier.report()


def _same_database(a: Store, b: Store) -> bool:
    first, second = a.url, b.url
    if (
        first.get_backend_name() != second.get_backend_name()
        or a.settings.schema != b.settings.schema
    ):
        return False
    if first.get_backend_name() == "sqlite":
        paths = [url.database or "" for url in (first, second)]
        if all(path and not path.startswith("file:") and path != ":memory:" for path in paths):
            return os.path.realpath(paths[0]) == os.path.realpath(paths[1])
        return paths[0] == paths[1] and paths[0] not in ("", ":memory:")
    return (first.host, first.port, first.database) == (second.host, second.port, second.database)


# --- the public functions ---------------------------------------------------------------------


def export_jsonl(
    ledger: Ledger,
    destination: Destination,
    *,
    session_ids: Sequence[str] | None = None,
    app_name: str | None = None,
    user_id: str | None = None,
    updated_since: datetime | None = None,
    batch: int = DEFAULT_BATCH,
    progress: ProgressCallback | None = None,
) -> ExportReport:
    """Write the ledger's rows (every table) to ``destination`` as JSON Lines.

    Reads one snapshot, page by page, in constant memory. Without filters, everything;
    with them, the matching sessions and all their rows. A path is written under a
    temporary name and renamed when complete; a ``.gz`` path is compressed.

    Raises:
        SchemaError: the database is not at this package's head.
        CorruptRecordError: a stored JSON value does not decode (never skipped).
    """
    selection = _Selection.of(session_ids, app_name, user_id, updated_since)
    return _export(open_store(ledger), destination, selection, _check_batch(batch), progress)


async def aexport_jsonl(
    ledger: AsyncLedger,
    destination: Destination,
    *,
    session_ids: Sequence[str] | None = None,
    app_name: str | None = None,
    user_id: str | None = None,
    updated_since: datetime | None = None,
    batch: int = DEFAULT_BATCH,
    progress: ProgressCallback | None = None,
) -> ExportReport:
    """``export_jsonl`` for an AsyncLedger (the file is written from the event loop's
    thread, between database round trips)."""
    selection = _Selection.of(session_ids, app_name, user_id, updated_since)
    store = await open_async_store(ledger)
    return await run_in_greenlet(
        _export, store, destination, selection, _check_batch(batch), progress
    )


def import_jsonl(
    ledger: Ledger,
    source: Source,
    *,
    batch: int = DEFAULT_BATCH,
    progress: ProgressCallback | None = None,
) -> ImportReport:
    """Import an export: insert the rows that are missing, leave identical ones alone,
    report the ones stored with other values (and keep the stored ones).

    Importing the same file twice changes nothing. Each page of whole sessions is one
    transaction; a file cut short imports every page but its last.

    Raises:
        ValidationError: the file is not an export this package reads, or a line is
            not a valid row (named by its line number); pages before it stay imported.
        SchemaError: the database is not at this package's head.
    """
    return _import(open_store(ledger), source, _check_batch(batch), progress)


async def aimport_jsonl(
    ledger: AsyncLedger,
    source: Source,
    *,
    batch: int = DEFAULT_BATCH,
    progress: ProgressCallback | None = None,
) -> ImportReport:
    """``import_jsonl`` for an AsyncLedger."""
    store = await open_async_store(ledger)
    return await run_in_greenlet(_import, store, source, _check_batch(batch), progress)


def copy_ledger(
    source: Ledger,
    target: Ledger,
    *,
    session_ids: Sequence[str] | None = None,
    app_name: str | None = None,
    user_id: str | None = None,
    updated_since: datetime | None = None,
    batch: int = DEFAULT_BATCH,
    progress: ProgressCallback | None = None,
) -> ImportReport:
    """Copy every row (or the selected sessions' rows) from ``source`` to ``target``.

    Reads one snapshot of the source in constant memory; writes one transaction per
    page of whole sessions, matching rows as ``import_jsonl`` does. Interrupted and run
    again, it skips what is there and ends with exactly one copy of every row.

    Raises:
        ValidationError: source and target are the same database.
        SchemaError: either database is not at this package's head.
    """
    selection = _Selection.of(session_ids, app_name, user_id, updated_since)
    return _copy(open_store(source), open_store(target), selection, _check_batch(batch), progress)


async def acopy_ledger(
    source: AsyncLedger,
    target: AsyncLedger,
    *,
    session_ids: Sequence[str] | None = None,
    app_name: str | None = None,
    user_id: str | None = None,
    updated_since: datetime | None = None,
    batch: int = DEFAULT_BATCH,
    progress: ProgressCallback | None = None,
) -> ImportReport:
    """``copy_ledger`` between two AsyncLedgers."""
    selection = _Selection.of(session_ids, app_name, user_id, updated_since)
    stores = (await open_async_store(source), await open_async_store(target))
    return await run_in_greenlet(_copy, *stores, selection, _check_batch(batch), progress)


__all__ = [
    "FORMAT_VERSION",
    "Conflict",
    "ExportReport",
    "ImportReport",
    "Progress",
    "ProgressCallback",
    "TableCounts",
    "acopy_ledger",
    "aexport_jsonl",
    "aimport_jsonl",
    "copy_ledger",
    "export_jsonl",
    "import_jsonl",
]
