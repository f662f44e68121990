"""Writing incoming rows (from a file or another database) in one transaction, page of
whole sessions by page, matching each row against the stored one by its natural key.

All or nothing by default (``Commit``): a row refused anywhere (a bad line, a session
whose counters do not match its rows, end-line counts that do not match the file)
rolls back every page before it too, so a refused import or copy leaves the target as
it was.

A row that is not stored is inserted; one stored with the same values is left alone,
so importing twice changes nothing; one stored with other values is a conflict: it is
reported and the stored row is kept. A session that conflicts is skipped whole, with
all its rows: merging two histories of one session would break its seq counters.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

from .._json import Limits
from ..errors import ValidationError
from ..repositories._base import Work
from ..repositories._portable import (
    CHECKPOINTS,
    SCOPED,
    SESSIONS,
    SPECS,
    TableSpec,
    differing,
)
from ..repositories.rows import RowRepository
from .reports import Conflict, ImportReport, TableCounts

MAX_REPORTED_CONFLICTS = 1000

Incoming = tuple[int | None, dict[str, Any]]
"""A row to import: its line in the file (None for a copy) and its values."""
Transaction = Callable[[], AbstractContextManager[Work]]
"""Opens a write transaction of the target ledger."""
Commit = Literal["all", "page"]
"""When rows are committed: ``all`` in one transaction at the end (a refusal or an
interruption leaves the target as it was), or each ``page`` of whole sessions on its
own (an interrupted copy keeps its pages; run again, it goes on where it stopped)."""


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
    sessions: dict[str, Incoming] = field(default_factory=dict)
    """The incoming rows of the fresh and kept sessions, to check their children by."""
    rows: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    """(kind, session) -> the seqs of the rows of that kind the page brought for it."""


_COUNTERS = {"message": "message_seq", "step": "step_count", "checkpoint": "checkpoint_seq"}
"""The session counter each child's seq is allocated from: no seq may pass it (the next
append would collide with the row), and for a fresh session none may repeat."""


class Applier:
    """Writes incoming rows to a ledger, one transaction per page of whole sessions."""

    def __init__(self, transaction: Transaction, limits: Limits, commit: Commit = "all") -> None:
        self._transaction = transaction
        self._limits = limits
        self._commit = commit
        self._open: ExitStack | None = None
        self._rows: RowRepository | None = None
        self._page = _Page()
        self.counts = {spec.plural: _Counts() for spec in SPECS}
        self.conflicts: list[Conflict] = []
        self.conflict_count = 0

    def feed(self, spec: TableSpec, rows: list[Incoming]) -> None:
        """Write one batch of one table's rows (a session batch after rows of other
        tables starts the next page: the current one is committed first)."""
        if spec is SESSIONS:
            if self._rows is None or self._page.children_seen:
                self._next_page()
            self._sessions(rows)
            return
        if spec in SCOPED:
            if self._rows is None:
                self._next_page()
            self._page.children_seen = True
            self._scoped(spec, rows)
            return
        if self._rows is None:
            raise ValidationError(f"{_where(rows[0][0], spec)}: a {spec.kind} before any session")
        self._page.children_seen = True
        self._children(spec, rows)

    def finish(self) -> None:
        """Check the last page, then commit every page."""
        if self._open is not None:
            self._check_counters()
        self._end(None, None, None)

    def abort(self, error: BaseException) -> None:
        """Roll back what is not committed: everything, unless pages are committed one
        by one (``commit="page"``)."""
        self._end(type(error), error, error.__traceback__)

    def report(self) -> ImportReport:
        """The counts and conflicts so far."""
        return ImportReport(
            tables={name: TableCounts(**vars(counts)) for name, counts in self.counts.items()},
            conflicts=list(self.conflicts),
            conflict_count=self.conflict_count,
        )

    def _end(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._open is not None:
            opened, self._open, self._rows = self._open, None, None
            opened.__exit__(kind, error, trace)

    def _next_page(self) -> None:
        if self._open is not None:
            self._check_counters()
            if self._commit == "page":
                self._end(None, None, None)
        if self._open is None:
            opened = ExitStack()
            work = opened.enter_context(self._transaction())
            self._open, self._rows = opened, RowRepository(work)
        self._page = _Page()

    def _check_counters(self) -> None:
        """Each fresh session's message_count is its number of messages, and no child
        seq of a session passes the counter it is allocated from (``_COUNTERS``):
        else every later append to the session would fail on a unique constraint."""
        page = self._page
        for (kind, id), seqs in page.rows.items():
            line, session = page.sessions[id]
            counter = _COUNTERS[kind]
            where = _where(line, SESSIONS, session)
            if max(seqs) > session[counter]:
                raise ValidationError(
                    f"{where}: session {id!r} has {counter} {session[counter]}, but a {kind} "
                    f"of it has seq {max(seqs)}: the counters must cover the rows that follow"
                )
        for id in page.fresh:
            line, session = page.sessions[id]
            messages = len(page.rows.get(("message", id), ()))
            if messages != session["message_count"]:
                raise ValidationError(
                    f"{_where(line, SESSIONS, session)}: session {id!r} has message_count "
                    f"{session['message_count']}, but {messages} message rows follow it"
                )

    def _repository(self) -> RowRepository:
        assert self._rows is not None
        return self._rows

    def _checked(self, spec: TableSpec, rows: list[Incoming]) -> list[Incoming]:
        result = []
        keys: set[tuple[Any, ...]] = set()
        for line, values in rows:
            where = _where(line, spec, values)
            row = RowRepository.checked(spec.kind, values, where=where, limits=self._limits)
            key = spec.key_of(row)
            if key in keys:
                raise ValidationError(f"{where}: {spec.describe(key)} appears twice")
            keys.add(key)
            result.append((line, row))
        return result

    def _sessions(self, rows: list[Incoming]) -> None:
        incoming = self._checked(SESSIONS, rows)
        stored = self._repository().stored(SESSIONS.kind, [row for _, row in incoming])
        counts, page = self.counts[SESSIONS.plural], self._page
        new = []
        for line, row in incoming:
            id = row["id"]
            old = stored.get((id,))
            if old is None:
                new.append(row)
                page.fresh.add(id)
                page.sessions[id] = (line, row)
            elif columns := differing(SESSIONS, row, old):
                self._conflict(SESSIONS, (id,), columns, line)
                page.skipped.add(id)
            else:
                counts.unchanged += 1
                page.kept.add(id)
                page.sessions[id] = (line, row)
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
        repository = self._repository()
        stored = repository.stored(spec.kind, [row for _, row in known])
        clashes = (
            repository.seq_clashes([row for _, row in known]) if spec is CHECKPOINTS else set()
        )
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
        if spec.kind in _COUNTERS:
            for row in new:
                page.rows.setdefault((spec.kind, row["session_id"]), []).append(row["seq"])
        self._insert(spec, new)

    def _scoped(self, spec: TableSpec, rows: list[Incoming]) -> None:
        """App or user state rows: each inserted, left alone or reported on its own."""
        incoming = self._checked(spec, rows)
        stored = self._repository().stored(spec.kind, [row for _, row in incoming])
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

    def _insert(self, spec: TableSpec, rows: list[dict[str, Any]]) -> None:
        self.counts[spec.plural].inserted += self._repository().insert(spec.kind, rows)


def _where(line: int | None, spec: TableSpec, values: object = None) -> str:
    """``line 12`` in a file; in a copy, the source row by its key."""
    if line is not None:
        return f"line {line}"
    if isinstance(values, dict):
        names = ("session_id", "seq") if spec.kind != "checkpoint" else ("ref",)
        key = tuple(values.get(name) for name in (("id",) if spec is SESSIONS else names))
        return f"source {spec.table.name} row {key[0] if len(key) == 1 else key!r}"
    return f"source {spec.table.name}"
