"""LangGraph's checkpoints as operations of a repository: ``LangGraphRepository``, over
``statements`` and ``values`` (its async face is generated in ``repositories._async``)."""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Integer,
    and_,
    bindparam,
    case,
    delete,
    func,
    literal,
    select,
)

from ..._checks import bounded_int, checked_text
from ..._json import check_json
from ..._limits import (
    MAX_CHANNEL_LENGTH,
    MAX_EXTERNAL_KEY_LENGTH,
    MAX_TASK_ID_LENGTH,
    MAX_VERSION_LENGTH,
)
from ..._translate import duplicate_as, foreign_key_as
from ...errors import ConflictError, ValidationError
from ...ids import new_session_id
from ...langgraph_records import (
    LANGGRAPH_APP_NAME,
    SHOWN_VALUE_BYTES,
    CheckpointRow,
    PruneStrategy,
    SessionRows,
    StoredCheckpoint,
    StoredWrite,
    Typed,
    ValueRow,
    WriteRow,
)
from .._base import Repository, Scope, operation
from .._session_row import SESSIONS
from .._statements import (
    insert_missing,
    json_key_equals,
    rows_before,
    rows_in,
    upsert_rows,
)
from ..sessions import external_key_hash, keyed_session_id, new_keyed_session
from .statements import (
    _AT_PART,
    _CHECKPOINT_KEY,
    _CHECKPOINT_PART,
    _LATEST,
    _ONE,
    _ORDER,
    _PAIR,
    _ROW,
    _SESSION_OF,
    _WRITES_OF,
    PAGE,
    _Missing,
    _newest_first,
    _next,
    _page_statement,
    _parts_of_many,
    _parts_of_one,
    _thread_session,
    _Upserted,
    _values_of,
    insert_for_new_session,
    insert_for_session_key,
    one_checkpoint_read,
    read_of_pairs,
    stores_for_session,
    threads_in_scope,
    touch_session_by_key,
)
from .values import (
    BLOBS,
    CHECKPOINTS,
    WRITES,
    _checkpoint_id,
    _in_langgraph_order,
    _matches,
    _namespace,
    _packed,
    _Position,
    _shown,
    _size_check,
    _stored_write,
    _typed,
    _unpacked,
    _Values,
    _Writes,
    assembled,
    metadata_of,
    once_per_index,
    shown_types,
    versions_of,
)

INTERRUPT_CHANNEL = "__interrupt__"
"""The channel of the pending writes that hold a LangGraph interrupt."""
TOUCH_EVERY = timedelta(seconds=1)
"""How far behind a thread's last write its session's ``updated_at`` may be: a write
sets it only when it is older than this, since rewriting the session row at every
``put`` and ``put_writes`` cost more page writes than the checkpoint itself."""


class LangGraphRepository(Repository):
    """The single implementation of the LangGraph checkpoint operations, for the threads
    of one scope (``app_name``, ``user_id``: the scope of their sessions' keys)."""

    def __init__(
        self, scope: Scope, *, app_name: str | None = LANGGRAPH_APP_NAME, user_id: str | None = None
    ) -> None:
        super().__init__(scope)
        self.app_name = app_name
        """The app_name of the threads' sessions."""
        self.user_id = user_id
        """The user_id of the threads' sessions."""

    def _within(self, work: Any) -> Any:
        if self._scope is work:
            return self
        return type(self)(work, app_name=self.app_name, user_id=self.user_id)

    # -- threads -----------------------------------------------------------------------

    def _key(self, thread_id: object) -> tuple[str, str]:
        key = checked_text(thread_id, "thread_id", max_length=MAX_EXTERNAL_KEY_LENGTH)
        return external_key_hash(self.app_name, self.user_id, key), key

    def _key_params(self, thread_id: object) -> dict[str, str]:
        digest, key = self._key(thread_id)
        return {"hash": digest, "key": key}

    def _session_of(self, thread_id: str) -> str | None:
        found = self._connection().execute(_SESSION_OF, self._key_params(thread_id))
        session_id: str | None = found.scalar_one_or_none()
        return session_id

    def _dialect_name(self) -> str:
        """The database's dialect, without beginning the transaction."""
        return self._work.dialect.name

    def _thread_session(self, thread_id: str) -> str:
        """The id of the thread's session, created if need be, its ``updated_at`` brought
        up to now when older than ``TOUCH_EVERY`` (retention rules and ``sessions list``
        see an active thread as active)."""
        now = self._work.settings.now()
        digest, key = self._key(thread_id)

        def find() -> str | None:
            return touch_session_by_key(self._connection(), digest, key, now, TOUCH_EVERY)

        found = find()
        if found is not None:
            return found
        return keyed_session_id(
            self._work,
            key,
            app_name=self.app_name,
            user_id=self.user_id,
            id=new_session_id("langgraph", now),
            find=find,
        )

    def _store_in_new_session(
        self,
        thread_id: str,
        missing: _Missing,
        upserted: _Upserted,
    ) -> bool:
        """Create the thread's session and store the rows in it, one statement
        (``statements.insert_for_new_session``, where ``stores_for_session``); False,
        having written nothing, when a session has its key by now (the thread is stored,
        or a concurrent first write created it) or its new id."""
        values = new_keyed_session(
            self._work,
            self._key(thread_id)[1],
            app_name=self.app_name,
            user_id=self.user_id,
            id=new_session_id("langgraph", self._work.settings.now()),
        )
        created = insert_for_new_session(self._connection(), values, missing, upserted)
        return bool(created)

    def _store(
        self,
        thread_id: str,
        missing: _Missing,
        upserted: _Upserted,
        *,
        opens_thread: bool = False,
    ) -> None:
        """``insert_missing`` of ``missing`` (table, rows, keys) and ``upsert_rows`` of
        ``upserted`` (table, rows, keys, refreshed columns), their rows without a
        ``session_id``, for the thread's session, created if need be. On PostgreSQL one
        statement finds the session by its key and stores them
        (``statements.insert_for_session_key``); when it finds none it writes
        nothing, and one more creates the session and stores them (``insert_for_new_session``), or,
        where a concurrent writer created it, the first runs again.

        ``opens_thread``: the write is likely the thread's first (a root checkpoint
        without a parent), so on PostgreSQL the statement creating the session goes
        first: a new thread's first put is one round trip, not two. A wrong guess (the
        thread is stored) costs the round trip the right one saves: that statement
        writes nothing, and the write by key follows."""

        def stored_by_key() -> bool | None:
            touch = (self._work.settings.now(), TOUCH_EVERY)
            key = self._key(thread_id)
            return insert_for_session_key(self._connection(), key, touch, missing, upserted)

        tried_new = opens_thread and stores_for_session(self._dialect_name())
        if tried_new and self._store_in_new_session(thread_id, missing, upserted):
            return
        stored = stored_by_key()  # None: the dialect stores by key in no statement
        if stored:
            return
        retry_new = stored is False and not tried_new
        if retry_new and self._store_in_new_session(thread_id, missing, upserted):
            return
        session_id = self._thread_session(thread_id)
        if stored is not None and stored_by_key():
            return
        table, rows, keys = missing
        target, targets, target_keys, refreshed = upserted
        for row in (*rows, *targets):
            row["session_id"] = session_id
        connection = self._connection()
        # The session found may be deleted before these INSERTs (MariaDB/MySQL read it
        # without a lock): their foreign key fails, and the call, run again, finds no
        # session and creates one, as it would have after the delete.
        with foreign_key_as(lambda: _deleted_meanwhile(thread_id)):
            insert_missing(connection, table, rows, keys)
            upsert_rows(connection, target, targets, target_keys, refreshed)

    # -- writing -----------------------------------------------------------------------

    @operation(writes=True, on_driver=True)
    def put(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        *,
        parent_checkpoint_id: str | None,
        checkpoint: Typed,
        channel_versions: dict[str, str],
        metadata: dict[str, Any],
        blobs: Sequence[tuple[str, str, Typed | None]],
    ) -> None:
        """Store a checkpoint, and the values of the channels it changed (``blobs``:
        channel, version, value or None for a channel without one). Putting the same
        checkpoint id again replaces it; a channel value already stored at its version
        is kept.

        Raises:
            ValidationError: a thread id, namespace, id, channel or version over its
                limit, metadata that is not JSON, or a checkpoint larger than
                ``Limits.max_checkpoint_bytes``; nothing is stored.
        """
        limits = self._work.settings.limits
        ns = _namespace(checkpoint_ns)
        row: dict[str, Any] = {
            "checkpoint_ns": ns,
            "checkpoint_id": _checkpoint_id(checkpoint_id),
            "parent_checkpoint_id": None
            if parent_checkpoint_id is None
            else _checkpoint_id(parent_checkpoint_id, "parent_checkpoint_id"),
            "created_at": self._work.settings.now(),
        }
        typed_checkpoint = _typed(checkpoint, "checkpoint")
        row["type"], row["checkpoint"] = _packed(typed_checkpoint)
        if type(metadata) is not dict:
            raise ValidationError("metadata must be a dict of JSON values", path="metadata")
        check_json(metadata, path="metadata", limits=limits, jsonb=True)
        run_id = metadata.get("run_id")
        row["run_id"] = str(run_id)[:255] if run_id is not None else None
        row["metadata"] = metadata
        row["channel_versions"] = {
            checked_text(name, "channel", max_length=MAX_CHANNEL_LENGTH): checked_text(
                version, "version", max_length=MAX_VERSION_LENGTH
            )
            for name, version in channel_versions.items()
        }
        values = []
        total = len(typed_checkpoint[1])
        for channel, version, value in blobs:
            typed = None if value is None else _typed(value, f"channel {channel!r}")
            total += 0 if typed is None else len(typed[1])
            stored = ("empty", None) if typed is None else _packed(typed)
            values.append(
                {
                    "checkpoint_ns": ns,
                    "channel": checked_text(channel, "channel", max_length=MAX_CHANNEL_LENGTH),
                    "version": checked_text(version, "version", max_length=MAX_VERSION_LENGTH),
                    "type": stored[0],
                    "blob": stored[1],
                }
            )
        _size_check(total, limits.max_checkpoint_bytes, "checkpoint")
        refreshed = [name for name in row if name not in _CHECKPOINT_KEY]
        blob_keys = ("session_id", "checkpoint_ns", "channel", "version")
        # Stored again, the same checkpoint and values replace themselves: a commit of
        # unknown outcome is retried by the ledger.
        self._work.replay_safe = True
        self._store(
            thread_id,
            (BLOBS, values, blob_keys),
            (CHECKPOINTS, [row], _CHECKPOINT_KEY, refreshed),
            opens_thread=parent_checkpoint_id is None and not ns,
        )

    @operation(writes=True, on_driver=True)
    def put_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        writes: Sequence[tuple[int, str, Typed]],
        *,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes on a checkpoint (each: index, channel, value).
        A regular write (index >= 0) already stored is kept as it is; a special one
        (negative index: error, interrupt, resume...) replaces the stored one.

        Raises:
            ValidationError: an id, namespace or channel over its limit, or writes
                larger than ``Limits.max_checkpoint_bytes``; nothing is stored.
        """
        ns = _namespace(checkpoint_ns)
        checkpoint_id = _checkpoint_id(checkpoint_id)
        task_id = checked_text(task_id, "task_id", max_length=MAX_TASK_ID_LENGTH)
        task_path = checked_text(task_path, "task_path", max_length=2**16, min_length=0)
        rows: list[dict[str, Any]] = []
        total = 0
        for idx, channel, value in writes:
            typed = _typed(value, f"write to {channel!r}")
            total += len(typed[1])
            typed = _packed(typed)
            rows.append(
                {
                    "checkpoint_ns": ns,
                    "checkpoint_id": checkpoint_id,
                    "task_id": task_id,
                    "idx": bounded_int(idx, "idx", low=-(2**31)),
                    "channel": checked_text(channel, "channel", max_length=MAX_CHANNEL_LENGTH),
                    "type": typed[0],
                    "blob": typed[1],
                    "task_path": task_path,
                }
            )
        _size_check(total, self._work.settings.limits.max_checkpoint_bytes, "writes")
        if not rows:
            return
        keys = ("session_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx")
        regular, special = once_per_index(rows)  # as if written one by one
        refreshed = ["channel", "type", "blob", "task_path"]
        self._work.replay_safe = True  # stored again, the same writes change nothing
        self._store(thread_id, (WRITES, regular, keys), (WRITES, special, keys, refreshed))

    # -- reading -----------------------------------------------------------------------

    @operation(writes=False, on_driver=True)
    def get(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None = None
    ) -> StoredCheckpoint | None:
        """The checkpoint ``checkpoint_id`` of the thread's namespace, or its newest when
        None; None when there is none. One statement of primary-key probes on PostgreSQL
        and SQLite (two on MariaDB/MySQL), whatever the thread's length."""
        params: dict[str, Any] = self._key_params(thread_id)
        params["ns"] = _namespace(checkpoint_ns)
        if checkpoint_id is not None:
            params["id"] = _checkpoint_id(checkpoint_id)
        query = _LATEST if checkpoint_id is None else _ONE
        statement = one_checkpoint_read(self._dialect_name(), checkpoint_id is None)
        if statement is None:
            # Two queries; the read transaction (REPEATABLE READ) is one snapshot.
            found = self._assemble(self._connection().execute(query, params).all())
            return found[0] if found else None
        rows = self._one_statement_connection().execute(statement, params).all()
        head = [row for row in rows if row[_AT_PART] == _CHECKPOINT_PART]
        if not head:
            return None
        one = (head[0].session_id, head[0].checkpoint_ns, head[0].checkpoint_id)
        return self._assemble(head, _parts_of_many(rows, one))[0]

    def list(
        self,
        thread_id: str | None,
        *,
        checkpoint_ns: str | None = None,
        checkpoint_id: str | None = None,
        before: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int | None = None,
    ) -> Iterator[StoredCheckpoint]:
        """The checkpoints of a thread (every thread of the scope when None), newest
        first: of one namespace or all, only ``checkpoint_id``, only those older than
        ``before``, whose metadata has every key of ``filter`` equal to its value, at
        most ``limit``. Read ``PAGE`` at a time, one indexed query each.

        Raises:
            ValidationError: a filter that is not a dict of JSON values, a bad limit.
        """
        if filter is not None:
            if type(filter) is not dict:
                raise ValidationError("filter must be a dict of JSON values", path="filter")
            check_json(filter, path="filter", limits=self._scope_limits())
        left = None if limit is None else bounded_int(limit, "limit")
        position: _Position | None = None
        while left is None or left > 0:
            page, position = self._page(
                thread_id,
                checkpoint_ns=checkpoint_ns,
                checkpoint_id=checkpoint_id,
                before=before,
                filter=filter,
                limit=PAGE if left is None else min(left, PAGE),
                after=position,
            )
            yield from page
            if left is not None:
                left -= len(page)
            if position is None:
                return

    def _scope_limits(self) -> Any:
        return self._scope.settings.limits

    @operation(writes=False, on_driver=True)
    def _page(
        self,
        thread_id: str | None,
        *,
        checkpoint_ns: str | None,
        checkpoint_id: str | None,
        before: str | None,
        filter: dict[str, Any] | None,
        limit: int,
        after: _Position | None,
    ) -> tuple[builtins.list[StoredCheckpoint], _Position | None]:
        """Up to ``limit`` matching checkpoints after ``after``, and where to go on from
        (None at the end)."""
        if thread_id is not None and not filter:
            found = self._page_in_one(
                thread_id, checkpoint_ns, checkpoint_id, before, limit=limit, after=after
            )
            if found is not None:
                return found
        conditions: builtins.list[ColumnElement[bool]] = []
        if thread_id is not None:
            conditions.append(CHECKPOINTS.c.session_id == _thread_session(*self._key(thread_id)))
        else:
            conditions.append(threads_in_scope(self.app_name, self.user_id))
        if checkpoint_ns is not None:
            conditions.append(CHECKPOINTS.c.checkpoint_ns == _namespace(checkpoint_ns))
        if checkpoint_id is not None:
            conditions.append(CHECKPOINTS.c.checkpoint_id == _checkpoint_id(checkpoint_id))
        if before is not None:
            conditions.append(CHECKPOINTS.c.checkpoint_id < _checkpoint_id(before, "before"))
        exact = True
        dialect = self._session.connection().dialect
        for key, value in (filter or {}).items():
            condition = json_key_equals(dialect, CHECKPOINTS.c.metadata, key, value)
            if condition is None:
                exact = False
            else:
                conditions.append(condition)
        if after is not None:
            keyset = (after.checkpoint_id, after.checkpoint_ns, after.session_id)
            conditions.append(rows_before(dialect, _ORDER, keyset))
        size = limit if exact else PAGE
        query = _ROW.where(*conditions).order_by(*_newest_first(checkpoint_ns is not None))
        rows = self._session.execute(query.limit(size)).all()
        position = _next(rows, size)
        if not exact:
            rows = [row for row in rows if _matches(metadata_of(row), filter or {})]
            rows = rows[:limit]
            if len(rows) == limit:
                last = rows[-1]
                position = _Position(last.checkpoint_id, last.checkpoint_ns, last.session_id)
        return self._assemble(rows), position

    def _page_in_one(
        self,
        thread_id: str,
        checkpoint_ns: str | None,
        checkpoint_id: str | None,
        before: str | None,
        *,
        limit: int,
        after: _Position | None,
    ) -> tuple[builtins.list[StoredCheckpoint], _Position | None] | None:
        """``_page`` of one thread without a filter as one prebuilt statement (the page,
        its values and its writes: one snapshot); None where the dialect has none."""
        shape = (checkpoint_ns is not None, checkpoint_id is not None, before is not None)
        statement = _page_statement(self._dialect_name(), *shape, after is not None)
        if statement is None:
            return None
        params: dict[str, Any] = self._key_params(thread_id)
        params["size"] = limit
        if checkpoint_ns is not None:
            params["ns"] = _namespace(checkpoint_ns)
        if checkpoint_id is not None:
            params["id"] = _checkpoint_id(checkpoint_id)
        if before is not None:
            params["before"] = _checkpoint_id(before, "before")
        if after is not None:
            params["after_id"] = after.checkpoint_id
            params["after_ns"] = after.checkpoint_ns
            params["after_session"] = after.session_id
        every = self._one_statement_connection().execute(statement, params).all()
        rows = [row for row in every if row[_AT_PART] == _CHECKPOINT_PART]
        rows.sort(key=lambda row: (row.checkpoint_id, row.checkpoint_ns, row.session_id))
        rows.reverse()
        return self._assemble(rows, _parts_of_many(every)), _next(rows, limit)

    def _assemble(
        self, rows: Sequence[Any], parts: tuple[_Values, _Writes] | None = None
    ) -> builtins.list[StoredCheckpoint]:
        """The checkpoints of ``rows`` with their channel values and writes (``parts``
        when already read): one query for the values of all of them, one for their
        writes (``values.assembled`` puts them together)."""
        if not rows:
            return []
        if parts is None and len(rows) == 1:
            parts = self._parts_of_one(rows[0])
        elif parts is None:
            parts = self._values(rows), self._writes(rows)
        return assembled(rows, *parts)

    def _parts_of_one(self, row: Any) -> tuple[_Values, _Writes]:
        pairs = sorted(versions_of(row).items())
        statement, params = read_of_pairs(self._dialect_name(), _parts_of_one, pairs)
        params.update(session_id=row.session_id, ns=row.checkpoint_ns, id=row.checkpoint_id)
        parts = self._connection().execute(statement, params).all()
        return _parts_of_many(parts, (row.session_id, row.checkpoint_ns, row.checkpoint_id))

    def _values(self, rows: Sequence[Any]) -> dict[tuple[str, str, str, str], Typed]:
        wanted: set[tuple[str, str, str, str]] = set()
        for row in rows:
            wanted.update(
                (row.session_id, row.checkpoint_ns, channel, version)
                for channel, version in versions_of(row).items()
            )
        if not wanted:
            return {}
        by_place: dict[tuple[str, str], builtins.list[tuple[str, str]]] = {}
        for session_id, ns, channel, version in wanted:
            by_place.setdefault((session_id, ns), []).append((channel, version))
        found: dict[tuple[str, str, str, str], Typed] = {}
        for (session_id, ns), pairs in by_place.items():
            statement, params = read_of_pairs(self._dialect_name(), _values_of, sorted(pairs))
            params.update(session_id=session_id, ns=ns)
            for row in self._connection().execute(statement, params):
                key = (session_id, ns, row.channel, row.version)
                found[key] = _unpacked(row.type, row.blob, BLOBS, key)
        return found

    def _writes(
        self, rows: Sequence[Any]
    ) -> dict[tuple[str, str, str], builtins.list[StoredWrite]]:
        keys = sorted({(row.session_id, row.checkpoint_ns, row.checkpoint_id) for row in rows})
        found: dict[tuple[str, str, str], builtins.list[StoredWrite]] = {}
        if len(keys) == 1:
            (key,) = keys
            params = {"session_id": key[0], "ns": key[1], "id": key[2]}
            stored = [(key, row) for row in self._connection().execute(_WRITES_OF, params)]
        else:
            condition = rows_in(
                self._dialect_name(),
                (WRITES.c.session_id, WRITES.c.checkpoint_ns, WRITES.c.checkpoint_id),
                keys,
            )
            every = select(
                WRITES.c.session_id,
                WRITES.c.checkpoint_ns,
                WRITES.c.checkpoint_id,
                *_WRITES_OF.selected_columns,
            ).where(condition)
            stored = [
                ((row.session_id, row.checkpoint_ns, row.checkpoint_id), row)
                for row in self._connection().execute(every)
            ]
        for key, row in stored:
            write = _stored_write(
                key, row.task_id, row.channel, row.type, row.blob, row.task_path, row.idx
            )
            found.setdefault(key, []).append(write)
        for writes in found.values():
            _in_langgraph_order(writes)
        return found

    @operation(writes=False)
    def session_rows(
        self, session_id: str, *, checkpoints: int = 200, writes: int = 500, values: int = 2000
    ) -> SessionRows:
        """The newest ``checkpoints`` checkpoints of session ``session_id`` (a thread, by
        its session id, whatever its scope) across its namespaces, up to ``writes``
        writes pending on them and up to ``values`` channel values at the versions they
        name (the newest checkpoints' first): for a viewer, read-only, three indexed
        queries (the ``(session_id, checkpoint_id)`` index, then the writes' and the
        values' primary keys). Values
        stay serialized: a type tag and bytes, the bytes only of small ``json`` and
        ``msgpack`` ones (``SHOWN_TYPES``, never a pickle).

        Raises:
            ValidationError: a bad session id or limit.
        """
        session_id = checked_text(session_id, "session_id", max_length=128)
        wanted = bounded_int(checkpoints, "checkpoints", high=10_000)
        most = bounded_int(writes, "writes", high=100_000)
        most_values = bounded_int(values, "values", high=10_000)
        params = {"s": session_id, "n": wanted + 1}
        rows = self._connection().execute(_session_checkpoints(), params).all()
        more = len(rows) > wanted
        rows = rows[:wanted]
        found = [_checkpoint_row(session_id, row) for row in rows]
        places = sorted({(row.checkpoint_ns, row.checkpoint_id) for row in rows})
        pending = self._session_writes(session_id, places, most) if places and most else []
        # The newest checkpoints' values first; each bound parameter list stays within
        # SQLite's 32,766 (values: 3 per version, writes: 2 per checkpoint).
        named = (
            (row.checkpoint_ns, *pair) for row in found for pair in row.channel_versions.items()
        )
        versions = list(dict.fromkeys(named))[:most_values]
        stored = (
            self._session_values(session_id, versions, most_values)
            if versions and most_values
            else []
        )
        return SessionRows(checkpoints=found, writes=pending, more=more, values=stored)

    @operation(writes=False)
    def paused(self, session_ids: Sequence[str]) -> builtins.list[str]:
        """The sessions among ``session_ids`` (threads, by session id, whatever their
        scope; at most 1,000) paused at an interrupt: their root namespace's newest
        checkpoint has an ``__interrupt__`` write pending. For a viewer's list, one
        query of primary-key probes per thread (its session, its newest root
        checkpoint, the writes on it), whatever the thread's length.

        Raises:
            ValidationError: more than 1,000 ids, or one that is not text.
        """
        if isinstance(session_ids, str) or len(session_ids) > 1000:
            raise ValidationError("session_ids: a list of at most 1,000 ids", path="session_ids")
        ids = [checked_text(id, "session_id", max_length=128) for id in session_ids]
        if not ids:
            return []
        # Driven by the sessions' primary key: per thread, one backward probe of the
        # checkpoints' primary key for the newest root checkpoint, then its writes'.
        thread = SESSIONS.c.id
        newest = (
            select(CHECKPOINTS.c.checkpoint_id)
            .where(CHECKPOINTS.c.session_id == thread, CHECKPOINTS.c.checkpoint_ns == "")
            .order_by(CHECKPOINTS.c.checkpoint_id.desc())
            .limit(1)
            .correlate(SESSIONS)  # two levels down: not found by auto-correlation
            .scalar_subquery()
        )
        held = (
            select(WRITES.c.idx)
            .where(
                WRITES.c.session_id == thread,
                WRITES.c.checkpoint_ns == "",
                WRITES.c.checkpoint_id == newest,
                WRITES.c.channel == INTERRUPT_CHANNEL,
            )
            .exists()
        )
        query = select(thread.label("session_id")).where(thread.in_(ids), held)
        found = {row.session_id for row in self._connection().execute(query)}
        return [id for id in ids if id in found]

    def _session_writes(
        self, session_id: str, places: builtins.list[tuple[str, str]], most: int
    ) -> builtins.list[WriteRow]:
        shown = _shown_case(WRITES.c.type, WRITES.c.blob)
        query = (
            select(
                WRITES.c.checkpoint_ns,
                WRITES.c.checkpoint_id,
                WRITES.c.task_id,
                WRITES.c.idx,
                WRITES.c.channel,
                WRITES.c.type,
                func.length(WRITES.c.blob).label("size"),
                shown.label("value"),
            )
            .where(
                WRITES.c.session_id == session_id,
                rows_in(
                    self._dialect_name(), (WRITES.c.checkpoint_ns, WRITES.c.checkpoint_id), places
                ),
            )
            .order_by(
                WRITES.c.checkpoint_ns,
                WRITES.c.checkpoint_id,
                WRITES.c.task_path,
                WRITES.c.task_id,
                WRITES.c.idx,
            )
            .limit(most)
        )
        return [
            WriteRow(
                checkpoint_ns=row.checkpoint_ns,
                checkpoint_id=row.checkpoint_id,
                task_id=row.task_id,
                idx=row.idx,
                channel=row.channel,
                type=row.type,
                size=int(row.size),
                value=_shown(
                    row.type,
                    row.value,
                    WRITES,
                    (session_id, row.checkpoint_ns, row.checkpoint_id, row.task_id, row.idx),
                ),
            )
            for row in self._connection().execute(query)
        ]

    def _session_values(
        self, session_id: str, versions: builtins.list[tuple[str, str, str]], most: int
    ) -> builtins.list[ValueRow]:
        shown = _shown_case(BLOBS.c.type, BLOBS.c.blob)
        query = (
            select(
                BLOBS.c.checkpoint_ns,
                BLOBS.c.channel,
                BLOBS.c.version,
                BLOBS.c.type,
                func.coalesce(func.length(BLOBS.c.blob), 0).label("size"),
                shown.label("value"),
            )
            .where(
                BLOBS.c.session_id == session_id,
                rows_in(self._dialect_name(), (BLOBS.c.checkpoint_ns, *_PAIR), versions),
            )
            .order_by(BLOBS.c.checkpoint_ns, BLOBS.c.channel, BLOBS.c.version)
            .limit(most)
        )
        return [
            ValueRow(
                checkpoint_ns=row.checkpoint_ns,
                channel=row.channel,
                version=row.version,
                type=row.type,
                size=int(row.size),
                value=_shown(
                    row.type,
                    row.value,
                    BLOBS,
                    (session_id, row.checkpoint_ns, row.channel, row.version),
                ),
            )
            for row in self._connection().execute(query)
        ]

    # -- removing and copying ----------------------------------------------------------

    @operation(writes=True)
    def delete_thread(self, thread_id: str) -> bool:
        """Delete the thread: its session, with every namespace, checkpoint, value and
        write (and the session's messages, steps...); whether there was one."""
        digest, key = self._key(thread_id)
        statement = delete(SESSIONS).where(
            SESSIONS.c.external_key_hash == digest, SESSIONS.c.external_key == key
        )
        return bool(self._session.execute(statement).rowcount)  # type: ignore[attr-defined]

    @operation(writes=True)
    def delete_for_runs(self, run_ids: Sequence[str]) -> int:
        """Delete the checkpoints written by the runs ``run_ids`` (in every thread of any
        scope), their writes, and the channel values no checkpoint uses any more;
        returns how many checkpoints went."""
        ids = [checked_text(run_id, "run_id", max_length=255) for run_id in run_ids]
        if not ids:
            return 0
        found = self._session.execute(
            select(
                CHECKPOINTS.c.session_id, CHECKPOINTS.c.checkpoint_ns, CHECKPOINTS.c.checkpoint_id
            ).where(CHECKPOINTS.c.run_id.in_(ids))
        ).all()
        by_place: dict[tuple[str, str], builtins.list[str]] = {}
        for row in found:
            by_place.setdefault((row.session_id, row.checkpoint_ns), []).append(row.checkpoint_id)
        for (session_id, ns), checkpoint_ids in sorted(by_place.items()):
            for table in (WRITES, CHECKPOINTS):
                self._session.execute(
                    delete(table).where(
                        table.c.session_id == session_id,
                        table.c.checkpoint_ns == ns,
                        table.c.checkpoint_id.in_(checkpoint_ids),
                    )
                )
            self._collect_values(session_id, ns)
        return len(found)

    @operation(writes=True)
    def prune(self, thread_ids: Sequence[str], *, strategy: PruneStrategy = "keep_latest") -> int:
        """Delete the older checkpoints of the threads ``thread_ids`` (``keep_latest``:
        the newest of each namespace stays, with its writes and values) or all of them
        (``delete``; the threads' sessions stay); returns how many checkpoints went.

        Raises:
            ValidationError: an unknown strategy.
        """
        if strategy not in ("keep_latest", "delete"):
            raise ValidationError(
                f"strategy must be 'keep_latest' or 'delete', got {strategy!r}", path="strategy"
            )
        removed = 0
        for thread_id in thread_ids:
            session_id = self._session_of(thread_id)
            if session_id is None:
                continue
            newest = self._session.execute(
                select(CHECKPOINTS.c.checkpoint_ns, func.max(CHECKPOINTS.c.checkpoint_id))
                .where(CHECKPOINTS.c.session_id == session_id)
                .group_by(CHECKPOINTS.c.checkpoint_ns)
            ).all()
            for ns, latest in newest:
                removed += self._prune_namespace(
                    session_id, ns, None if strategy == "delete" else latest
                )
        return removed

    def _prune_namespace(self, session_id: str, ns: str, keep: str | None) -> int:
        removed = 0
        for table in (WRITES, CHECKPOINTS):
            statement = delete(table).where(
                table.c.session_id == session_id, table.c.checkpoint_ns == ns
            )
            if keep is not None:
                statement = statement.where(table.c.checkpoint_id != keep)
            result = self._session.execute(statement)
            if table is CHECKPOINTS:
                removed = int(result.rowcount)  # type: ignore[attr-defined]
        self._collect_values(session_id, ns)
        return removed

    def _collect_values(self, session_id: str, ns: str) -> None:
        """Delete the namespace's channel values that no stored checkpoint uses."""
        used: set[tuple[str, str]] = set()
        query = select(CHECKPOINTS.c.checkpoint_id, CHECKPOINTS.c.channel_versions).where(
            CHECKPOINTS.c.session_id == session_id, CHECKPOINTS.c.checkpoint_ns == ns
        )
        for row in self._session.execute(query):
            used.update(versions_of(row).items())
        stored = self._session.execute(
            select(BLOBS.c.channel, BLOBS.c.version).where(
                BLOBS.c.session_id == session_id, BLOBS.c.checkpoint_ns == ns
            )
        ).all()
        unused = [
            (row.channel, row.version) for row in stored if (row.channel, row.version) not in used
        ]
        for start in range(0, len(unused), 500):
            self._session.execute(
                delete(BLOBS).where(
                    BLOBS.c.session_id == session_id,
                    BLOBS.c.checkpoint_ns == ns,
                    rows_in(self._dialect_name(), _PAIR, unused[start : start + 500]),
                )
            )

    @operation(writes=True)
    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> int:
        """Copy every checkpoint, value and write of one thread to another (created if
        need be); returns how many checkpoints were copied (0 for an unknown source).

        Raises:
            ConflictError: reason ``exists`` when the target already holds one of the
                source's checkpoints; nothing is copied.
        """
        source = self._session_of(source_thread_id)
        self._key(target_thread_id)
        if source is None:
            return 0
        target = self._thread_session(target_thread_id)
        if target == source:
            return 0
        copied = 0
        with duplicate_as(
            lambda: ConflictError(
                f"thread {target_thread_id!r} already holds checkpoints of "
                f"{source_thread_id!r}: nothing was copied",
                reason="exists",
            )
        ):
            for table in (CHECKPOINTS, BLOBS, WRITES):
                columns = [column for column in table.c if column.name != "session_id"]
                rows = select(literal(target).label("session_id"), *columns).where(
                    table.c.session_id == source
                )
                names = ["session_id", *(column.name for column in columns)]
                result = self._session.execute(table.insert().from_select(names, rows))
                if table is CHECKPOINTS:
                    copied = int(result.rowcount)  # type: ignore[attr-defined]
        return copied


def _shown_case(kind: Any, blob: Any) -> ColumnElement[Any]:
    """``blob`` where a viewer may be given its bytes (a ``SHOWN_TYPES`` type, stored
    small enough), else NULL: larger values never leave the database."""
    return case(
        (and_(kind.in_(shown_types()), func.length(blob) <= SHOWN_VALUE_BYTES), blob),
        else_=None,
    )


def _session_checkpoints() -> Any:
    """A thread's newest ``n`` checkpoints, for ``session_rows``."""
    return (
        select(
            CHECKPOINTS.c.checkpoint_ns,
            CHECKPOINTS.c.checkpoint_id,
            CHECKPOINTS.c.parent_checkpoint_id,
            CHECKPOINTS.c.metadata,
            CHECKPOINTS.c.type,
            func.length(CHECKPOINTS.c.checkpoint).label("size"),
            _shown_case(CHECKPOINTS.c.type, CHECKPOINTS.c.checkpoint).label("shown"),
            CHECKPOINTS.c.channel_versions,
            CHECKPOINTS.c.created_at,
            CHECKPOINTS.c.session_id,
        )
        .where(CHECKPOINTS.c.session_id == bindparam("s"))
        .order_by(CHECKPOINTS.c.checkpoint_id.desc())
        .limit(bindparam("n", type_=Integer()))
    )


def _checkpoint_row(session_id: str, row: Any) -> CheckpointRow:
    return CheckpointRow(
        checkpoint_ns=row.checkpoint_ns,
        checkpoint_id=row.checkpoint_id,
        parent_checkpoint_id=row.parent_checkpoint_id,
        metadata=metadata_of(row),
        type=row.type,
        size=int(row.size),
        created_at=row.created_at,
        channel_versions=versions_of(row),
        checkpoint=_shown(
            row.type,
            row.shown,
            CHECKPOINTS,
            (session_id, row.checkpoint_ns, row.checkpoint_id),
        ),
    )


def _deleted_meanwhile(thread_id: str) -> ConflictError:
    """A write whose thread's session was deleted while it ran: retried, it stores the
    write in a new session of the thread."""
    return ConflictError(
        f"the session of thread {thread_id!r} was deleted while this write ran; run it "
        "again to store it in a new session",
        reason="serialization",
    )
