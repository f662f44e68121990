"""Export to JSON Lines, import, and copy between databases: ``ledger.transfer``.

- ``api``: ``Transfer`` (sync) and ``AsyncTransfer``, the operations and the format's
  description (see ``Transfer``);
- ``reader``: a selection of whole sessions, page by page, from one snapshot;
- ``applier``: incoming rows matched by natural key and written a page per transaction;
- ``files``: the file itself (lines, header, atomic write, gzip), I/O off the event loop;
- ``reports``: progress and the reports the operations return.

Rows travel through ``repositories.rows.RowRepository``: nothing here queries a table.
"""

from .api import DEFAULT_BATCH, MAX_BATCH, AsyncTransfer, Transfer
from .files import FORMAT_VERSION, Destination, Source
from .reports import (
    Conflict,
    ExportReport,
    ImportReport,
    Progress,
    ProgressCallback,
    TableCounts,
)

__all__ = [
    "DEFAULT_BATCH",
    "FORMAT_VERSION",
    "MAX_BATCH",
    "AsyncTransfer",
    "Conflict",
    "Destination",
    "ExportReport",
    "ImportReport",
    "Progress",
    "ProgressCallback",
    "Source",
    "TableCounts",
    "Transfer",
]
