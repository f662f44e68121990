"""Rows as stored, in bulk: what export, import and copy read and write, table by table.

Reads page through a selection of whole sessions by primary key, and each page's
child rows by (session, seq) keyset, so memory stays flat whatever the database's
size. Writes check every row against the table's column rules first (``_portable``),
then insert; matching an incoming row against the stored one is by natural key.
Maintenance (``agentledger.transfer``) reaches the tables only through here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Row, and_, func, insert, or_, select

from .._json import Limits, check_json
from ..records import SessionSelection
from ._base import Repository, operation
from ._portable import (
    CHECKPOINTS,
    SCOPED,
    SESSIONS,
    SPECS,
    TableSpec,
    checked,
    from_database,
)
from ._session_row import selected
from ._statements import json_from_text, rows_in

BATCH_BYTES = 16 * 1024 * 1024
"""Checkpoints are read at most this many bytes of payload at a time."""


class RowRepository(Repository):
    """Every table's rows as portable dicts (``_portable``), for moving them in bulk."""

    @operation(writes=False)
    def counts(self, selection: SessionSelection) -> dict[str, int]:
        """Rows of each table (by plural kind) in the selected sessions."""
        conditions = selected(selection)
        chosen = select(SESSIONS.table.c.id).where(*conditions)
        counts = {}
        for spec in SPECS:
            query = select(func.count()).select_from(spec.table)
            if spec is SESSIONS:
                query = query.where(*conditions)
            elif spec in SCOPED:
                scoped = _scoped_conditions(spec, selection)
                if scoped is None:
                    counts[spec.plural] = 0
                    continue
                query = query.where(*scoped)
            elif conditions:
                query = query.where(spec.table.c.session_id.in_(chosen))
            counts[spec.plural] = int(self._session.execute(query).scalar_one())
        return counts

    @operation(writes=False)
    def sessions(
        self, selection: SessionSelection, *, after: str | None, limit: int
    ) -> list[dict[str, Any]]:
        """Up to ``limit`` selected sessions with ids after ``after``, by id."""
        table = SESSIONS.table
        query = SESSIONS.select().where(*selected(selection))
        if after is not None:
            query = query.where(table.c.id > after)
        rows = self._session.execute(query.order_by(table.c.id).limit(limit)).all()
        return [from_database(SESSIONS, row) for row in rows]

    @operation(writes=False)
    def children(
        self, kind: str, session_ids: Sequence[str], *, after: tuple[Any, ...] | None, limit: int
    ) -> tuple[list[dict[str, Any]], tuple[Any, ...] | None]:
        """Up to ``limit`` rows of one child table (``message``, ``step``, ``grant``) of
        the sessions ``session_ids``, after the keyset position ``after``; and the
        position of the last one (None when there are none), to pass back as ``after``."""
        spec = _spec(kind)
        query = spec.select().where(spec.table.c.session_id.in_(session_ids))
        if after is not None:
            query = query.where(spec.after(after))
        rows = self._session.execute(query.order_by(*spec.ordering()).limit(limit)).all()
        last = tuple(rows[-1]._mapping[name] for name in spec.order) if rows else None
        return [from_database(spec, row) for row in rows], last

    @operation(writes=False)
    def scoped(
        self, kind: str, selection: SessionSelection, *, after: tuple[Any, ...] | None, limit: int
    ) -> tuple[list[dict[str, Any]], tuple[Any, ...] | None]:
        """Up to ``limit`` app or user state rows (``app_state``, ``user_state``) that
        ``selection`` picks (none when it picks sessions by id), after the keyset
        position ``after``; and the position of the last one."""
        spec = _spec(kind)
        conditions = _scoped_conditions(spec, selection)
        if conditions is None:
            return [], None
        query = spec.select().where(*conditions)
        if after is not None:
            query = query.where(spec.after(after))
        rows = self._session.execute(query.order_by(*spec.ordering()).limit(limit)).all()
        last = tuple(rows[-1]._mapping[name] for name in spec.order) if rows else None
        return [from_database(spec, row) for row in rows], last

    def checkpoints(
        self, session_ids: Sequence[str], *, limit: int
    ) -> Iterator[list[dict[str, Any]]]:
        """Every checkpoint of the sessions ``session_ids`` in (session, seq) order, in
        groups of at most ``BATCH_BYTES`` of payload: their sizes are read first, since
        one payload may be megabytes."""
        position: tuple[Any, ...] | None = None
        while True:
            sizes = self._checkpoint_sizes(session_ids, after=position, limit=limit)
            for group in _by_bytes(sizes):
                yield self._checkpoints_by_ref([row.ref for row in group])
            if len(sizes) < limit:
                return
            position = (sizes[-1].session_id, sizes[-1].seq)

    @operation(writes=False)
    def _checkpoint_sizes(
        self, session_ids: Sequence[str], *, after: tuple[Any, ...] | None, limit: int
    ) -> list[Row[Any]]:
        table = CHECKPOINTS.table
        query = select(table.c.ref, table.c.session_id, table.c.seq, table.c.size).where(
            table.c.session_id.in_(session_ids)
        )
        if after is not None:
            query = query.where(CHECKPOINTS.after(after))
        return list(self._session.execute(query.order_by(*CHECKPOINTS.ordering()).limit(limit)))

    @operation(writes=False)
    def _checkpoints_by_ref(self, refs: Sequence[str]) -> list[dict[str, Any]]:
        query = CHECKPOINTS.select().where(CHECKPOINTS.table.c.ref.in_(refs))
        rows = self._session.execute(query.order_by(*CHECKPOINTS.ordering())).all()
        return [from_database(CHECKPOINTS, row) for row in rows]

    @staticmethod
    def checked(kind: str, values: object, *, where: str, limits: Limits) -> dict[str, Any]:
        """An incoming row checked column by column against its table's rules (see
        ``_portable.checked``); ``where`` names it in a ValidationError."""
        return checked(_spec(kind), values, where=where, limits=limits)  # type: ignore[arg-type]

    @operation(writes=False)
    def stored(
        self, kind: str, rows: Sequence[dict[str, Any]]
    ) -> dict[tuple[Any, ...], dict[str, Any]]:
        """The stored rows with the natural keys of ``rows``, by key."""
        spec = _spec(kind)
        if not rows:
            return {}
        table = spec.table
        condition: ColumnElement[bool]
        if len(spec.key) == 1:
            column = table.c[spec.key[0]]
            condition = column.in_([row[spec.key[0]] for row in rows])
        elif len(spec.key) == 2:
            first, second = spec.key
            condition = _grouped(table.c[first], table.c[second], rows, second, first)
        else:
            dialect = self._session.connection().dialect
            first, *rest = spec.key
            others = [table.c[name] for name in rest]
            by_first: dict[Any, list[tuple[Any, ...]]] = {}
            for row in rows:
                by_first.setdefault(row[first], []).append(tuple(row[name] for name in rest))
            condition = or_(
                *(
                    and_(table.c[first] == value, rows_in(dialect, others, keys))
                    for value, keys in by_first.items()
                )
            )
        found = self._session.execute(spec.select().where(condition)).all()
        result = {}
        for raw in found:
            row = from_database(spec, raw)
            if spec.kind == "grant":
                row["capability_hash"] = raw.capability_hash
            result[spec.key_of(row)] = row
        return result

    @operation(writes=False)
    def seq_clashes(self, rows: Sequence[dict[str, Any]]) -> set[tuple[str, int]]:
        """(session, seq) of checkpoints stored under another ref than the incoming one."""
        if not rows:
            return set()
        table = CHECKPOINTS.table
        condition = _grouped(table.c.session_id, table.c.seq, rows, "seq")
        found = self._session.execute(
            select(table.c.ref, table.c.session_id, table.c.seq).where(condition)
        )
        refs = {(row["session_id"], row["seq"]): row["ref"] for row in rows}
        return {
            (row.session_id, row.seq)
            for row in found
            if refs.get((row.session_id, row.seq)) not in (None, row.ref)
        }

    @operation(writes=True)
    def insert(self, kind: str, rows: Sequence[dict[str, Any]]) -> int:
        """Insert rows already ``checked``; returns how many."""
        spec = _spec(kind)
        if not rows:
            return 0
        if spec is CHECKPOINTS:
            for row in rows:
                self._insert_checkpoint(row)
        else:
            self._session.execute(insert(spec.table), list(rows))
        return len(rows)

    def _insert_checkpoint(self, row: dict[str, Any]) -> None:
        """One checkpoint, its payload as the JSON text the checkpoint repository writes
        (see ``_statements.json_from_text``: the default encoder could outgrow the limit)."""
        limits = self._work.settings.limits
        text = check_json(
            row["payload"], path="payload", limits=limits, max_bytes=limits.max_checkpoint_bytes
        )
        values = {name: value for name, value in row.items() if name != "payload"}
        payload = json_from_text(self._session, text)
        self._session.execute(insert(CHECKPOINTS.table).values(payload=payload, **values))


def _spec(kind: str) -> TableSpec:
    for spec in SPECS:
        if spec.kind == kind:
            return spec
    raise ValueError(f"no table of kind {kind!r}")


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


def _scoped_conditions(
    spec: TableSpec, selection: SessionSelection
) -> list[ColumnElement[bool]] | None:
    """The app or user state or memory rows ``selection`` picks (None: none, when it
    picks sessions by id, a user's rows of the app state table, or an app's or user's
    memory items, which belong to neither)."""
    if selection.session_ids is not None:
        return None
    table = spec.table
    found: list[ColumnElement[bool]] = []
    if selection.app_name is not None:
        if "app_name" not in table.c:  # memory items belong to no app
            return None
        found.append(table.c.app_name == selection.app_name)
    if selection.user_id is not None:
        if "user_id" not in table.c:
            return None
        found.append(table.c.user_id == selection.user_id)
    if selection.updated_since is not None:
        found.append(table.c.updated_at >= selection.updated_since)
    if selection.updated_before is not None:
        found.append(table.c.updated_at < selection.updated_before)
    return found


def _grouped(
    session_column: Any,
    column: Any,
    rows: Sequence[dict[str, Any]],
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
