"""Reading a selection of whole sessions page by page, each page's rows table by table.

All pages are read in one snapshot transaction (``RowRepository`` bound to it), so an
export or copy of a busy database is still one consistent picture.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..records import SessionSelection
from ..repositories._portable import CHECKPOINTS, CHILDREN, SESSIONS, TableSpec
from ..repositories.rows import RowRepository

PAGE_SESSIONS = 500
"""At most this many sessions per page (one transaction on import and copy)."""
PAGE_ROWS = 20_000
"""A page ends before the session that would take it past this many rows (estimated
from the session's counters); a larger session is a page of its own."""

Batch = tuple[TableSpec, list[dict[str, Any]]]
"""Rows of one table, in keyset order."""


class Pages:
    """The selected sessions page by page; per page, its sessions, then each child
    table's rows in batches."""

    def __init__(self, rows: RowRepository, selection: SessionSelection, batch: int) -> None:
        self._rows = rows
        self._selection = selection
        self._batch = batch

    def total(self) -> int:
        """Rows in the selection, every table (for progress only: a count reads them all)."""
        return sum(self._rows.counts(self._selection).values())

    def batches(self) -> Iterator[Batch]:
        """Every selected row, parents before their children."""
        for page in self._pages():
            yield SESSIONS, page
            ids = [row["id"] for row in page]
            for spec in CHILDREN:
                yield from ((spec, rows) for rows in self._children(spec, ids))

    def _pages(self) -> Iterator[list[dict[str, Any]]]:
        limit = min(PAGE_SESSIONS, self._batch)
        after: str | None = None
        while True:
            rows = self._rows.sessions(self._selection, after=after, limit=limit)
            page: list[dict[str, Any]] = []
            budget = 0
            for row in rows:
                estimate = 1 + row["message_count"] + row["step_count"] + row["checkpoint_seq"]
                if page and budget + estimate > PAGE_ROWS:
                    break
                page.append(row)
                budget += estimate
            if not page:
                return
            yield page
            if len(rows) < limit and len(page) == len(rows):
                return
            after = page[-1]["id"]

    def _children(self, spec: TableSpec, ids: list[str]) -> Iterator[list[dict[str, Any]]]:
        if spec is CHECKPOINTS:
            yield from self._rows.checkpoints(ids, limit=self._batch)
            return
        position: tuple[Any, ...] | None = None
        while True:
            rows, position = self._rows.children(spec.kind, ids, after=position, limit=self._batch)
            if rows:
                yield rows
            if len(rows) < self._batch:
                return
