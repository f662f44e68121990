"""A session's append-only log ordered by seq: the reads messages and steps share.

Both tables are keyed by (session_id, seq); the newest ``n``, a window after a seq
and the whole log are each one query on that key, built once. An empty answer is
told apart from a session that does not exist by a second look at the session row,
only when the answer is empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Integer, Row, Select, Table, bindparam
from sqlalchemy.orm import Session

from .._checks import bounded_int
from ..errors import NotFoundError
from ..ids import validate_id
from ._session_row import session_exists


class SeqLog:
    """The prebuilt reads of one seq-ordered child table of sessions."""

    def __init__(self, table: Table, read: Select[Any], *, max_read: int) -> None:
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

    def last(self, session: Session, id: str, n: object) -> Sequence[Row[Any]]:
        """The newest ``n`` rows of session ``id``, in seq order."""
        validate_id(id)
        count = bounded_int(n, "n", low=1, high=self.max_read)
        return list(reversed(self._rows(session, id, self._last, n=count)))

    def window(
        self, session: Session, id: str, *, after_seq: object, limit: object
    ) -> Sequence[Row[Any]]:
        """Up to ``limit`` rows of session ``id`` after ``after_seq``, in seq order."""
        validate_id(id)
        count = bounded_int(limit, "limit", low=1, high=self.max_read)
        after = bounded_int(after_seq, "after_seq")
        return self._rows(session, id, self._window, after=after, n=count)

    def all(self, session: Session, id: str) -> Sequence[Row[Any]]:
        """Every row of session ``id``, in seq order."""
        validate_id(id)
        return self._rows(session, id, self._all)

    def _rows(
        self, session: Session, id: str, query: Select[Any], **params: Any
    ) -> Sequence[Row[Any]]:
        rows = session.connection().execute(query, {"id": id, **params}).all()
        if not rows and not session_exists(session, id):
            raise NotFoundError(f"no session {id!r}", id=id)
        return rows
