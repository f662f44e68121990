"""A session's append-only log ordered by seq: the reads messages and steps share.

Both tables are keyed by (session_id, seq); the newest ``n``, a window after a seq
and the whole log are each one query on that key, built once. An empty answer is
told apart from a session that does not exist by a second look at the session row,
only when the answer is empty. A read that asks for more than ``STREAM_ABOVE`` rows
is fetched in partitions (a server-side cursor where the driver has one), so the
driver never holds the whole answer next to the records built from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Integer, Row, Select, Table, bindparam
from sqlalchemy.orm import Session

from .._checks import bounded_int
from ..errors import NotFoundError
from ..ids import validate_id
from ..records import collector_paused
from ._base import Work
from ._session_row import session_exists
from ._statements import stream_options

STREAM_ABOVE = 10_000
"""Reads asking for more rows than this are streamed in partitions of this many."""


class SeqLog:
    """The prebuilt reads of one seq-ordered child table of sessions."""

    def __init__(self, table: Table, read: Select[Any], *, max_read: int) -> None:
        self.table = table
        of_session = table.c.session_id == bindparam("id")
        count = bindparam("n", type_=Integer())
        # Built once: building and cache-keying a statement per call cost more than
        # running it.
        self._last = read.where(of_session).order_by(table.c.seq.desc()).limit(count)
        self._window = (
            read.where(of_session, table.c.seq > bindparam("after"))
            .order_by(table.c.seq)
            .limit(count)
        )
        self._all = read.where(of_session).order_by(table.c.seq)
        self.max_read = max_read
        """The most rows one read may ask for."""

    def last(self, work: Work, connection: Connection, id: str, n: object) -> Sequence[Row[Any]]:
        """The newest ``n`` rows of session ``id``, in seq order."""
        validate_id(id)
        count = bounded_int(n, "n", low=1, high=self.max_read)
        return list(reversed(self.rows(work, connection, id, self._last, n=count)))

    def last_rows(self, session: Session, id: str, count: int) -> Sequence[Row[Any]]:
        """The newest ``count`` rows of session ``id`` (checked by the caller), in seq
        order; an empty list whether or not the session exists."""
        rows = session.connection().execute(self._last, {"id": id, "n": count}).all()
        return list(reversed(rows))

    def all_rows(self, session: Session, id: str) -> Sequence[Row[Any]]:
        """Every row of session ``id`` (checked by the caller), in seq order; an empty
        list whether or not the session exists."""
        return session.connection().execute(self._all, {"id": id}).all()

    def window(
        self, work: Work, connection: Connection, id: str, *, after_seq: object, limit: object
    ) -> Sequence[Row[Any]]:
        """Up to ``limit`` rows of session ``id`` after ``after_seq``, in seq order."""
        validate_id(id)
        count = bounded_int(limit, "limit", low=1, high=self.max_read)
        after = bounded_int(after_seq, "after_seq")
        return self.rows(work, connection, id, self._window, after=after, n=count)

    def all(self, work: Work, connection: Connection, id: str) -> Sequence[Row[Any]]:
        """Every row of session ``id``, in seq order."""
        validate_id(id)
        return self.rows(work, connection, id, self._all)

    def rows(
        self, work: Work, connection: Connection, id: str, query: Select[Any], **params: Any
    ) -> Sequence[Row[Any]]:
        """The rows of ``query`` (on session ``id``), read on ``connection`` (the
        repository's ``_one_statement_session_connection``); NotFoundError when there
        are none and the session does not exist."""
        if params.get("n", 0) > STREAM_ABOVE:
            connection = connection.execution_options(**stream_options(connection, STREAM_ABOVE))
        result = connection.execute(query, {"id": id, **params})
        with collector_paused():  # building thousands of rows: see records.collector_paused
            rows = result.all()
        if not rows and not session_exists(work.session, id):
            raise NotFoundError(f"no session {id!r}", id=id)
        return rows
