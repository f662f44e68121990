"""Messages: the ordered conversation of a session, versioned with the session row.

An append from a record checks and bumps the session's revision with one versioned
UPDATE (the check of the mapper's ``version_id_col``), then inserts the messages with
one prebuilt INSERT in the same transaction, taking the new seqs from the record: a
stale writer's UPDATE matches no row, and none of its messages are stored. Appending
costs the same whatever the length of the conversation: one UPDATE, one INSERT, and
where the UPDATE cannot return the row (MariaDB/MySQL), one SELECT of it.

A message may carry the caller's key (``external_key``), unique per session. Keys
are looked up *before* the revision check: a retry of an append whose commit had an
unknown outcome finds its messages stored and returns them, where the revision check
alone would call its (now stale) record a conflict. The same call may apply a state
delta to the session (in the same versioned UPDATE) and to its app and user state:
their rows are read with the key look-up, in the same statement, the merged states
checked before anything is written, and stored after the session's row (the lock order
of every writer) with one versioned UPDATE each; a scope row that is new or that
another writer moved since the read is merged under its row lock instead. One
revision step per call.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, cast

from pydantic import ValidationError as PydanticValidationError
from sqlalchemy import (
    CompoundSelect,
    Integer,
    Row,
    Table,
    Text,
    bindparam,
    delete,
    insert,
    literal_column,
    null,
    select,
    type_coerce,
    union_all,
)

from .._checks import bounded_int, checked_text
from .._dialects import locking
from .._json import canonical, check_object, check_row, decode_json, loads
from .._limits import MAX_ROW_KEY_LENGTH
from .._translate import duplicate_as
from ..clock import utc
from ..errors import ConflictError, CorruptRecordError, ValidationError
from ..ids import validate_id
from ..models import AgentMessage
from ..models.types import json_text
from ..records import (
    Appended,
    Conversation,
    Message,
    NewMessage,
    Popped,
    SessionRecord,
    StateDelta,
    collector_paused,
    from_stored,
    stored_maker,
)
from . import _state
from ._base import Repository, operation
from ._seqlog import SeqLog
from ._session_row import (
    ONE_STATEMENT_ROWS,
    current_or_conflict,
    load_record,
    write_versioned,
    write_versioned_and_insert,
)
from ._statements import appends_in_one_statement

_MESSAGES = cast(Table, AgentMessage.__table__)
MAX_READ = 2**31 - 1
"""The most messages one read may ask for: no cap below what one query can stream
(seqs are 32-bit integers)."""
_READ = select(
    _MESSAGES.c.seq,
    _MESSAGES.c.role,
    json_text(_MESSAGES.c.content).label("content"),
    json_text(_MESSAGES.c.metadata).label("metadata"),
    _MESSAGES.c.created_at,
    _MESSAGES.c.external_key,
)
_LOG = SeqLog(_MESSAGES, _READ, max_read=MAX_READ)
_INSERT = insert(_MESSAGES)
_OF_SESSION = _MESSAGES.c.session_id == bindparam("id")
_DELETE_ALL = delete(_MESSAGES).where(_OF_SESSION)
_DELETE_FROM = delete(_MESSAGES).where(_OF_SESSION, _MESSAGES.c.seq >= bindparam("seq"))
_COUNT = bindparam("n", type_=Integer())
_AT = bindparam("at", type_=_MESSAGES.c.created_at.type)
_BY_TIME = (_MESSAGES.c.created_at, _MESSAGES.c.seq)
# Each one query on the (session_id, created_at, seq) index; ties in time order by seq.
_SINCE = _READ.where(_OF_SESSION, _MESSAGES.c.created_at >= _AT)
_BEFORE = _READ.where(_OF_SESSION, _MESSAGES.c.created_at < _AT)
_TIME_READS = {
    (False, False): _SINCE.order_by(*_BY_TIME),
    (False, True): _SINCE.order_by(*(c.desc() for c in _BY_TIME)).limit(_COUNT),
    (True, False): _BEFORE.order_by(*_BY_TIME),
    (True, True): _BEFORE.order_by(*(c.desc() for c in _BY_TIME)).limit(_COUNT),
}
_BY_KEYS = _READ.where(_OF_SESSION, _MESSAGES.c.external_key.in_(bindparam("keys", expanding=True)))
_BY_KEYS_LOCKED = locking(_BY_KEYS, read=True)
# What the key lookup adds to the tagged scope reads to share one UNION ALL with them
# (_keys_and_scopes): the scope parts come first and name the columns.
_PADDING = (
    type_coerce(null(), _MESSAGES.c.role.type).label("role"),
    type_coerce(null(), Text()).label("metadata"),
    type_coerce(null(), _MESSAGES.c.external_key.type).label("external_key"),
)
_KEYED = select(
    literal_column("-1").label("part"),
    _MESSAGES.c.seq,
    json_text(_MESSAGES.c.content).label("content"),
    _MESSAGES.c.created_at,
    null().label("updated_at"),
    _MESSAGES.c.role,
    json_text(_MESSAGES.c.metadata).label("metadata"),
    _MESSAGES.c.external_key,
).where(_OF_SESSION, _MESSAGES.c.external_key.in_(bindparam("keys", expanding=True)))
_KEYS_AND_SCOPES: dict[tuple[str, ...], CompoundSelect[Any]] = {}
PREVIEW_LENGTH = 256

MessageInput = NewMessage | Message | dict[str, Any]
"""What ``append`` and ``replace`` take: a NewMessage, a Message read earlier (its seq
is ignored; its time and key are kept) or a dict with ``role``, ``content`` and
optional ``metadata``, ``created_at`` and ``external_key``."""
Delta = StateDelta | dict[str, Any]
"""A state delta: a StateDelta, or a dict ``{"set": {...}, "delete": [...]}``."""
_SCOPE_DELTAS = (("app_state_delta", _state.APP), ("user_state_delta", _state.USER))
_Scope = tuple[str, _state.ScopeKind, tuple[str, ...], Any, dict[str, Any]]
"""A scope an append merges into: the delta's name, the scope's kind, key and record
as read, and the merged state to store."""


def _as_new_messages(messages: MessageInput | Iterable[MessageInput]) -> list[NewMessage]:
    items: Sequence[Any]
    if isinstance(messages, NewMessage | Message | dict):
        items = [messages]
    elif isinstance(messages, str | bytes) or not isinstance(messages, Iterable):
        raise ValidationError(
            "messages must be a message (NewMessage, Message or dict) or a list of them",
            path="messages",
        )
    else:
        items = list(messages)
    result = []
    for index, item in enumerate(items):
        if isinstance(item, NewMessage):
            result.append(item)
        elif isinstance(item, Message):
            result.append(
                NewMessage(
                    role=item.role,
                    content=item.content,
                    metadata=item.metadata,
                    created_at=item.created_at,
                    external_key=item.external_key,
                )
            )
        elif isinstance(item, dict):
            try:
                result.append(NewMessage.model_validate(item))
            except PydanticValidationError as error:
                where = f"messages[{index}]"
                fields = error.errors()[0]["loc"] if error.errors() else ()
                path = f"{where}.{fields[0]}" if fields else where
                raise ValidationError(f"{where}: {error}", path=path) from None
        else:
            raise ValidationError(
                f"messages[{index}] is a {type(item).__name__}, not a message",
                path=f"messages[{index}]",
            )
    return result


def preview_of(content: Any) -> str | None:
    """The text of a message, shortened for listings: a string, a ``text`` field, or the
    text parts of a list of parts (the shape most model APIs use)."""
    text: str | None = None
    if isinstance(content, str):
        text = content
    elif isinstance(content, dict) and isinstance(content.get("text"), str):
        text = content["text"]
    elif isinstance(content, dict | list):
        parts = content.get("parts") if isinstance(content, dict) else content
        if isinstance(parts, list):
            texts = [
                p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
            ]
            text = " ".join(texts) if texts else None
    if not text:
        return None
    text = " ".join(text.split())
    if len(text) <= PREVIEW_LENGTH:
        return text
    cut = text[: PREVIEW_LENGTH - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > PREVIEW_LENGTH // 2 else cut) + "…"


def message_of(row: Row[Any], session_id: str) -> Message:
    """A Message from a row of ``_READ``, decoding its JSON columns."""
    return messages_of([row], session_id)[0]


def messages_of(rows: Sequence[Sequence[Any]], session_id: str) -> list[Message]:
    """Messages from rows of ``_READ``: JSON decoded here (a value that does not decode,
    or metadata that is not an object, raises CorruptRecordError naming the row), the
    records built without validating again what was validated on write."""
    result: list[Message] = []
    add = result.append
    with collector_paused():
        for seq, role, content_text, metadata_text, created_at, external_key in rows:
            try:
                content = loads(content_text)
                metadata = {} if metadata_text == "{}" else loads(metadata_text)
            except (ValueError, TypeError):
                content, metadata = _decode_slowly(session_id, seq, content_text, metadata_text)
            if type(metadata) is not dict:
                raise _not_an_object(session_id, seq)
            values = {
                "seq": seq,
                "role": role,
                "content": content,
                "metadata": metadata,
                "created_at": created_at,
                "external_key": external_key,
            }
            add(_message(values))
    return result


_message = stored_maker(Message)


def _decode_slowly(session_id: str, seq: int, *texts: str | None) -> tuple[Any, Any]:
    """Decode one row column by column, so the error names the column that is corrupt."""
    key = (session_id, seq)
    table = "agentledger_messages"
    content, metadata = (
        decode_json(text, table=table, key=key, column=column)
        for text, column in zip(texts, ("content", "metadata"), strict=True)
    )
    return content, metadata


def _not_an_object(session_id: str, seq: int) -> CorruptRecordError:
    table, key = "agentledger_messages", (session_id, seq)
    return CorruptRecordError(
        f"{table} row {key!r}: column metadata is JSON but not an object; it was written "
        "by something other than agentledger",
        table=table,
        key=key,
        column="metadata",
    )


class MessageRepository(Repository):
    """The single implementation of the message operations."""

    def _validated(self, messages: MessageInput | Iterable[MessageInput]) -> list[NewMessage]:
        limits = self._work.settings.limits
        checked = _as_new_messages(messages)
        keys: set[str] = set()
        for index, message in enumerate(checked):
            where = f"messages[{index}]"
            if "\x00" in message.role:
                raise ValidationError(
                    f"{where}.role contains a NUL character", path=f"{where}.role"
                )
            check_object(message.metadata, path=f"{where}.metadata", limits=limits)
            check_row(
                {"content": message.content, "metadata": message.metadata},
                path=where,
                limits=limits,
            )
            changes: dict[str, Any] = {}
            if message.created_at is not None:
                changes["created_at"] = utc(message.created_at, field=f"{where}.created_at")
            if message.external_key is not None:
                key = checked_text(
                    message.external_key, f"{where}.external_key", max_length=MAX_ROW_KEY_LENGTH
                )
                if key in keys:
                    raise ValidationError(
                        f"{where}.external_key {key!r} appears twice in the batch",
                        path=f"{where}.external_key",
                    )
                keys.add(key)
            if changes:
                checked[index] = message.model_copy(update=changes)
        return checked

    def _deltas(self, **deltas: Delta | None) -> dict[str, StateDelta]:
        limits = self._work.settings.limits
        return {
            name: _state.as_delta(delta, path=name, limits=limits)
            for name, delta in deltas.items()
            if delta is not None
        }

    def _target(self, session: SessionRecord | str, operation: str) -> tuple[SessionRecord, bool]:
        """The record an optimistic call checks, or for a blind call (an id) the stored
        one, read under the row lock; and whether the call is blind."""
        if isinstance(session, SessionRecord):
            return session, False
        if isinstance(session, str):
            return load_record(self._session, validate_id(session), lock="update"), True
        raise ValidationError(
            f"{operation}() takes a SessionRecord or a session id, got {type(session).__name__}",
            path="session",
        )

    def _stored_by_key(
        self,
        id: str,
        messages: list[NewMessage],
        *,
        locked: bool,
        scopes: _state.Scopes | None = None,
    ) -> tuple[dict[str, Message], list[Any] | None]:
        """The stored messages of session ``id`` with the keys of ``messages``, by key;
        ConflictError ``duplicate`` for one stored with other content. With ``scopes``
        (an unlocked lookup only), their records too, read by the same statement (see
        ``_keys_and_scopes``); else None for them."""
        keys = [m.external_key for m in messages if m.external_key is not None]
        if not keys:
            return {}, None
        connection = self._session.connection()
        records = None
        if scopes:
            assert not locked
            names = tuple(kind.name for kind, _ in scopes)
            statement = _KEYS_AND_SCOPES.get(names)
            if statement is None:
                statement = _KEYS_AND_SCOPES.setdefault(names, _keys_and_scopes(scopes))
            params = {"id": id, "keys": keys, **_state.scope_params(scopes)}
            found = connection.execute(statement, params).all()
            records = _state.scope_records(scopes, found)
            rows: Sequence[Sequence[Any]] = [
                (row.revision, row.role, row.state, row.metadata, row.created_at, row.external_key)
                for row in found
                if row.part < 0
            ]
        else:
            query = _BY_KEYS_LOCKED if locked else _BY_KEYS
            rows = connection.execute(query, {"id": id, "keys": keys}).all()
        stored = {message.external_key: message for message in messages_of(rows, id)}
        for message in messages:
            found_one = stored.get(message.external_key) if message.external_key else None
            if found_one is not None and not _same_message(message, found_one):
                raise ConflictError(
                    f"session {id!r} already holds a message with key "
                    f"{message.external_key!r} and other content",
                    reason="duplicate",
                    id=id,
                )
        return {key: message for key, message in stored.items() if key is not None}, records

    def _write(
        self,
        record: SessionRecord,
        messages: list[NewMessage],
        *,
        replace: bool,
        state_delta: StateDelta | None = None,
    ) -> tuple[SessionRecord, list[Message]]:
        now = self._work.settings.now()
        values: dict[str, Any] = {
            "message_seq": record.message_seq + len(messages),
            "message_count": (0 if replace else record.message_count) + len(messages),
            "updated_at": now,
        }
        if state_delta is not None:
            limits = self._work.settings.limits
            values["state"] = _state.applied(record.state, state_delta, path="state", limits=limits)
        if record.preview is None:
            opening = next((m for m in messages if m.role == "user"), None)
            preview = preview_of(opening.content) if opening is not None else None
            if preview is not None:
                values["preview"] = preview
        stored = [
            from_stored(
                Message,
                {
                    "seq": record.message_seq + offset,
                    "role": message.role,
                    "content": message.content,
                    "metadata": message.metadata,
                    "created_at": message.created_at or now,
                    "external_key": message.external_key,
                },
            )
            for offset, message in enumerate(messages, start=1)
        ]
        rows = [
            {
                "session_id": record.id,
                "seq": message.seq,
                "role": message.role,
                "content": message.content,
                "metadata": message.metadata,
                "created_at": message.created_at,
                "external_key": message.external_key,
            }
            for message in stored
        ]
        # A key inserted meanwhile by a writer that bypassed the revision is a duplicate.
        with duplicate_as(lambda: _duplicate(record.id)):
            if (
                not replace
                and 0 < len(rows) <= ONE_STATEMENT_ROWS
                and appends_in_one_statement(self._session)
            ):
                after = write_versioned_and_insert(self._session, record, values, _MESSAGES, rows)
                return after, stored
            # The versioned UPDATE goes first: a stale writer stops here, before any of
            # its rows is written (and, on PostgreSQL, before it could wait on the
            # winner's seqs).
            after = write_versioned(self._session, record, values)
            connection = self._session.connection()
            if replace:
                connection.execute(_DELETE_ALL, {"id": record.id})
            if rows:
                # One prebuilt INSERT (a batch for several): no identity map needed.
                connection.execute(_INSERT, rows if len(rows) > 1 else rows[0])
        return after, stored

    @staticmethod
    def _wanted(record: SessionRecord, deltas: dict[str, StateDelta]) -> _state.Scopes:
        """The app and user scopes a call merges into (a delta that changes something),
        in that order: after the session row, the lock order of every writer."""
        return [
            (kind, tuple(getattr(record, column) for column in kind.keys))
            for name, kind in _SCOPE_DELTAS
            if name in deltas and not _state.is_empty(deltas[name])
        ]

    def _scopes(
        self, wanted: _state.Scopes, reads: list[Any] | None, deltas: dict[str, StateDelta]
    ) -> list[_Scope]:
        """Each scope of ``wanted`` with its record (``reads``, else read for all of them
        in one unlocked SELECT) and its merged state, checked within the limits before
        anything is written."""
        if not wanted:
            return []
        if reads is None:
            reads = _state.read_many(self._session, wanted)
        limits = self._work.settings.limits
        names = {kind.name: name for name, kind in _SCOPE_DELTAS}
        scopes = []
        for (kind, key), read in zip(wanted, reads, strict=True):
            name = names[kind.name]
            state = _state.applied(read.state, deltas[name], path=name, limits=limits)
            scopes.append((name, kind, key, read, state))
        return scopes

    def _merge_scopes(
        self,
        deltas: dict[str, StateDelta],
        scopes: list[_Scope],
    ) -> None:
        """Store the merged app and user states of ``_scopes``: one versioned UPDATE each
        (a merge under the row lock when the row is new or moved since it was read)."""
        now, limits = self._work.settings.now(), self._work.settings.limits
        for name, kind, key, read, state in scopes:
            _state.merge_from(
                self._session, kind, key, read, state, deltas[name], now, limits, path=name
            )

    @staticmethod
    def _check_scopes(record: SessionRecord, deltas: dict[str, StateDelta]) -> None:
        needs = {"app_state_delta": ("app_name",), "user_state_delta": ("app_name", "user_id")}
        for name, columns in needs.items():
            for column in columns:
                if name in deltas and getattr(record, column) is None:
                    raise ValidationError(
                        f"{name}: session {record.id!r} has no {column}, so it has no "
                        f"{name.removesuffix('_delta').replace('_', ' ')}",
                        path=name,
                    )

    @operation(writes=True)
    def append(
        self,
        session: SessionRecord | str,
        messages: MessageInput | Iterable[MessageInput],
        *,
        state_delta: Delta | None = None,
        app_state_delta: Delta | None = None,
        user_state_delta: Delta | None = None,
    ) -> Appended:
        """Append messages to the conversation; returns the session at its new revision
        and the messages with their seqs (one INSERT for the batch).

        From a record, the append is optimistic: it succeeds only while the record's
        revision is still the stored one. From an id, it is a blind append: it takes
        the session's row lock, bumps the revision and never conflicts.

        A message whose ``external_key`` is already stored with the same content is
        returned as stored and not appended again; when every message of the batch is
        stored, the call changes nothing (no revision bump, no delta applied). Keys are
        checked before the revision, so retrying an append whose commit had an unknown
        outcome is safe.

        ``state_delta`` (keys to set and delete) changes the session's state in the same
        revision step; ``app_state_delta`` and ``user_state_delta`` are merged into the
        state of the session's app and user (see ``ledger.app_state``).

        Raises:
            ConflictError: from a record, ``stale`` when another writer changed the
                session first, ``deleted`` when it was deleted; ``duplicate`` when a key
                is stored with other content. None of the messages are stored.
            NotFoundError: a blind append to a session that does not exist.
            ValidationError: a message that cannot be stored, named by its index; a bad
                delta; an app or user delta for a session without that scope; no
                message and no delta.
        """
        checked = self._validated(messages)
        self._work.replay_safe = bool(checked) and all(m.external_key for m in checked)
        deltas = self._deltas(
            state_delta=state_delta,
            app_state_delta=app_state_delta,
            user_state_delta=user_state_delta,
        )
        if not checked and all(_state.is_empty(delta) for delta in deltas.values()):
            # Like steps.append([]): a call that stores nothing is a caller's mistake,
            # not a revision bump.
            raise ValidationError(
                "append() needs at least one message, or a state delta", path="messages"
            )
        record, blind = self._target(session, "append")
        self._check_scopes(record, deltas)
        wanted = self._wanted(record, deltas)
        # From a record, the key lookup and the scopes' reads are one statement.
        stored, reads = self._stored_by_key(
            record.id, checked, locked=blind, scopes=None if blind else wanted
        )
        found = [stored.get(m.external_key) if m.external_key else None for m in checked]
        new = [m for m, old in zip(checked, found, strict=True) if old is None]
        if checked and not new:
            current = record if blind else load_record(self._session, record.id)
            return Appended(session=current, messages=[old for old in found if old is not None])
        scopes = self._scopes(wanted, reads, deltas)
        after, written = self._write(
            record, new, replace=False, state_delta=deltas.get("state_delta")
        )
        self._merge_scopes(deltas, scopes)
        fresh = iter(written)
        result = [old if old is not None else next(fresh) for old in found]
        return Appended(session=after, messages=result)

    @operation(writes=True)
    def replace(
        self, session: SessionRecord, messages: MessageInput | Iterable[MessageInput]
    ) -> SessionRecord:
        """Swap the whole conversation for ``messages`` (compaction), atomically.

        The new messages continue the seqs after the highest ever issued: a seq is
        never reused. Optimistic like ``append`` from a record. Keys of the old
        messages are free again; the new ones must not repeat within the batch.

        Raises:
            ConflictError: ``stale`` or ``deleted``, as for ``append``; nothing changes.
            ValidationError: a message that cannot be stored.
        """
        if not isinstance(session, SessionRecord):
            raise ValidationError(
                f"replace() takes a SessionRecord, got {type(session).__name__}",
                path="session",
            )
        after, _ = self._write(session, self._validated(messages), replace=True)
        return after

    @operation(writes=True)
    def pop(self, session: SessionRecord | str, n: int = 1) -> Popped:
        """Remove the newest ``n`` messages; returns them (in seq order) and the session
        at its new revision. Their seqs are never issued again. An empty conversation
        pops nothing and changes nothing.

        From a record it is optimistic like ``append``; from an id it is blind (takes
        the row lock, never conflicts).

        Raises:
            ConflictError: from a record, ``stale`` or ``deleted``; nothing is removed.
            NotFoundError: a blind pop on a session that does not exist.
            ValidationError: ``n`` is not an int of 1 or more.
        """
        count = bounded_int(n, "n", low=1, high=MAX_READ)
        record, blind = self._target(session, "pop")
        newest = messages_of(_LOG.last_rows(self._session, record.id, count), record.id)
        if not newest:
            current = record if blind else current_or_conflict(self._session, record)
            return Popped(session=current, messages=[])
        values = {
            "message_count": record.message_count - len(newest),
            "updated_at": self._work.settings.now(),
        }
        after = write_versioned(self._session, record, values)
        self._session.connection().execute(_DELETE_FROM, {"id": record.id, "seq": newest[0].seq})
        return Popped(session=after, messages=newest)

    @operation(writes=False)
    def last(self, id: str, n: int) -> list[Message]:
        """The most recent ``n`` messages, in chronological (seq) order.

        Raises:
            NotFoundError: no such session.
        """
        return messages_of(
            _LOG.last(self._work, self._one_statement_session_connection(), id, n), id
        )

    @operation(writes=False)
    def window(self, id: str, *, after_seq: int = 0, limit: int = 100) -> list[Message]:
        """Up to ``limit`` messages after ``after_seq``, in seq order: page through a long
        conversation by passing the last seq seen.

        Raises:
            NotFoundError: no such session.
        """
        return messages_of(
            _LOG.window(
                self._work,
                self._one_statement_session_connection(),
                id,
                after_seq=after_seq,
                limit=limit,
            ),
            id,
        )

    @operation(writes=False)
    def since(self, id: str, at: datetime, *, last: int | None = None) -> list[Message]:
        """The messages created at or after ``at`` (inclusive), in time order (ties by
        seq); with ``last``, only the newest ``last`` of them. One indexed query.

        Raises:
            NotFoundError: no such session.
            ValidationError: a naive ``at``, a ``last`` below 1.
        """
        return self._by_time(id, at, before=False, last=last)

    @operation(writes=False)
    def before(self, id: str, at: datetime, *, last: int | None = None) -> list[Message]:
        """The messages created before ``at``, in time order (ties by seq); with
        ``last``, only the newest ``last`` of them. One indexed query.

        Raises:
            NotFoundError: no such session.
            ValidationError: a naive ``at``, a ``last`` below 1.
        """
        return self._by_time(id, at, before=True, last=last)

    def _by_time(self, id: str, at: object, *, before: bool, last: int | None) -> list[Message]:
        validate_id(id)
        if not isinstance(at, datetime):
            raise ValidationError(f"at must be a datetime, got {type(at).__name__}", path="at")
        params: dict[str, Any] = {"at": utc(at, field="at")}
        if last is not None:
            params["n"] = bounded_int(last, "last", low=1, high=MAX_READ)
        rows = _LOG.rows(
            self._work,
            self._one_statement_session_connection(),
            id,
            _TIME_READS[before, last is not None],
            **params,
        )
        found = messages_of(rows, id)
        return found[::-1] if last is not None else found

    @operation(writes=False, snapshot=True)
    def conversation(self, id: str, *, last: int | None = None) -> Conversation:
        """The session and its whole conversation, or its newest ``last`` messages (in
        seq order), read in one read-only transaction on one snapshot: what an agent
        loads at the start of a turn, in one call.

        Raises:
            NotFoundError: no such session.
            ValidationError: a ``last`` below 1.
        """
        validate_id(id)
        count = None if last is None else bounded_int(last, "last", low=1, high=MAX_READ)
        record = load_record(self._session, id)
        if count is None:
            rows = _LOG.all_rows(self._session, id)
        else:
            rows = _LOG.last_rows(self._session, id, count)
        found = {"session": record, "messages": messages_of(rows, id)}
        return from_stored(Conversation, found)

    @operation(writes=False)
    def all(self, id: str) -> list[Message]:
        """The whole conversation, in seq order.

        Raises:
            NotFoundError: no such session.
        """
        return messages_of(_LOG.all(self._work, self._one_statement_session_connection(), id), id)


def _keys_and_scopes(scopes: _state.Scopes) -> CompoundSelect[Any]:
    """The key lookup of an append (``_BY_KEYS``) and the unlocked reads of the scopes
    it merges into (``_state.ScopeKind.tagged``) as one UNION ALL: one round trip. The
    scopes' parts come first (they name and type the columns: a message's seq comes
    back as ``revision``, its content as ``state``); the messages' rows have part -1."""
    parts = [kind.tagged(index, *_PADDING) for index, (kind, _) in enumerate(scopes)]
    return union_all(*parts, _KEYED)


def _same_message(new: NewMessage, stored: Message) -> bool:
    """Whether a retried message is the one stored under its key: the same role, content
    and metadata (as JSON), and the same time when the caller gave one."""
    return (
        new.role == stored.role
        and canonical(new.content) == canonical(stored.content)
        and canonical(new.metadata) == canonical(stored.metadata)
        and (new.created_at is None or new.created_at == stored.created_at)
    )


def _duplicate(id: str) -> ConflictError:
    return ConflictError(
        f"a message key of this append was stored in session {id!r} meanwhile",
        reason="duplicate",
        id=id,
    )
