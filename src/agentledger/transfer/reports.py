"""What export, import and copy report: progress while they run, and the totals."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from ..records import Record


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
