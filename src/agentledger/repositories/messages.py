"""Messages: the ordered conversation of a session, versioned with the session row.

An append from a record checks and bumps the session's revision with a versioned
ORM flush (``version_id_col``), then inserts the messages with one prebuilt INSERT in
the same transaction, taking the new seqs from the record (so no ``UPDATE ...
RETURNING`` is needed on any dialect): a stale writer's UPDATE matches no row, and
none of its messages are stored. Appending costs the same whatever the
length of the conversation: one UPDATE, one INSERT, and where the UPDATE cannot return
the row (MariaDB/MySQL), one SELECT of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, cast

from sqlalchemy import Row, Table, bindparam, delete, insert, select

from .._concurrency import spawn
from .._json import check_object, check_row, decode_json
from ..errors import CorruptRecordError, ValidationError
from ..ids import validate_id
from ..models import AgentMessage
from ..models.types import json_text
from ..records import Message, NewMessage, SessionRecord, from_stored
from ._base import Repository, operation
from ._seqlog import SeqLog
from ._session_row import (
    flush_versioned,
    load_record,
    versioned_row,
    written_record,
)

_MESSAGES = cast(Table, AgentMessage.__table__)
MAX_READ = 10_000
"""The most messages one read returns."""
_READ = select(
    _MESSAGES.c.seq,
    _MESSAGES.c.role,
    json_text(_MESSAGES.c.content).label("content"),
    json_text(_MESSAGES.c.metadata).label("metadata"),
    _MESSAGES.c.created_at,
)
_LOG = SeqLog(_MESSAGES, _READ, max_read=MAX_READ)
_INSERT = insert(_MESSAGES)
_DELETE_ALL = delete(_MESSAGES).where(_MESSAGES.c.session_id == bindparam("id"))
PREVIEW_LENGTH = 256

MessageInput = NewMessage | Message | dict[str, Any]
"""What ``append`` and ``replace`` take: a NewMessage, a Message read earlier (its seq
is ignored) or a dict with ``role``, ``content`` and optional ``metadata``."""


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
            result.append(NewMessage(role=item.role, content=item.content, metadata=item.metadata))
        elif isinstance(item, dict):
            try:
                result.append(NewMessage.model_validate(item))
            except ValueError as error:
                raise ValidationError(
                    f"messages[{index}]: {error}", path=f"messages[{index}]"
                ) from None
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
    loads = json.loads
    result = []
    for seq, role, content_text, metadata_text, created_at in rows:
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
        }
        result.append(from_stored(Message, values))
    return result


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
        for index, message in enumerate(checked):
            if "\x00" in message.role:
                raise ValidationError(f"messages[{index}].role contains a NUL character")
            check_object(message.metadata, path=f"messages[{index}].metadata", limits=limits)
            check_row(
                {"content": message.content, "metadata": message.metadata},
                path=f"messages[{index}]",
                limits=limits,
            )
        return checked

    def _write(
        self, record: SessionRecord, messages: list[NewMessage], *, replace: bool
    ) -> SessionRecord:
        now = self._work.settings.now()
        row = versioned_row(self._session, record)
        row.message_seq = record.message_seq + len(messages)
        row.message_count = (0 if replace else record.message_count) + len(messages)
        row.updated_at = now
        if record.preview is None:
            opening = next((m for m in messages if m.role == "user"), None)
            preview = preview_of(opening.content) if opening is not None else None
            if preview is not None:
                row.preview = preview
        # The versioned UPDATE goes first: a stale writer stops here, before any of its
        # rows is written (and, on PostgreSQL, before it could wait on the winner's seqs).
        flush_versioned(self._session, record)
        connection = self._session.connection()
        if replace:
            connection.execute(_DELETE_ALL, {"id": record.id})
        rows = [
            {
                "session_id": record.id,
                "seq": record.message_seq + offset,
                "role": message.role,
                "content": message.content,
                "metadata": message.metadata,
                "created_at": now,
            }
            for offset, message in enumerate(messages, start=1)
        ]
        if rows:
            # One prebuilt INSERT (a batch for several): the rows need no identity map.
            connection.execute(_INSERT, rows if len(rows) > 1 else rows[0])
        return written_record(self._session, row)

    @operation(writes=True)
    def append(
        self,
        session: SessionRecord | str,
        messages: MessageInput | Iterable[MessageInput],
    ) -> SessionRecord:
        """Append messages to the conversation; returns the session at its new revision.

        From a record, the append is optimistic: it succeeds only while the record's
        revision is still the stored one. From an id, it is a blind append: it takes
        the session's row lock, bumps the revision and never conflicts.

        Raises:
            ConflictError: from a record, ``stale`` when another writer changed the
                session first, ``deleted`` when it was deleted; none of the messages
                are stored.
            NotFoundError: a blind append to a session that does not exist.
            ValidationError: a message that cannot be stored, named by its index.
        """
        checked = self._validated(messages)
        if isinstance(session, SessionRecord):
            record = session
        elif isinstance(session, str):
            record = load_record(self._session, validate_id(session), lock="update")
        else:
            raise ValidationError(
                f"append() takes a SessionRecord or a session id, got {type(session).__name__}",
                path="session",
            )
        return self._write(record, checked, replace=False)

    @operation(writes=True)
    def replace(
        self, session: SessionRecord, messages: MessageInput | Iterable[MessageInput]
    ) -> SessionRecord:
        """Swap the whole conversation for ``messages`` (compaction), atomically.

        The new messages continue the seqs after the highest ever issued: a seq is
        never reused. Optimistic like ``append`` from a record.

        Raises:
            ConflictError: ``stale`` or ``deleted``, as for ``append``; nothing changes.
            ValidationError: a message that cannot be stored.
        """
        if not isinstance(session, SessionRecord):
            raise ValidationError(
                f"replace() takes a SessionRecord, got {type(session).__name__}",
                path="session",
            )
        return self._write(session, self._validated(messages), replace=True)

    @operation(writes=False)
    def last(self, id: str, n: int) -> list[Message]:
        """The most recent ``n`` messages, in chronological (seq) order.

        Raises:
            NotFoundError: no such session.
        """
        return messages_of(_LOG.last(self._session, id, n), id)

    @operation(writes=False)
    def window(self, id: str, *, after_seq: int = 0, limit: int = 100) -> list[Message]:
        """Up to ``limit`` messages after ``after_seq``, in seq order: page through a long
        conversation by passing the last seq seen.

        Raises:
            NotFoundError: no such session.
        """
        return messages_of(_LOG.window(self._session, id, after_seq=after_seq, limit=limit), id)

    @operation(writes=False)
    def all(self, id: str) -> list[Message]:
        """The whole conversation, in seq order.

        Raises:
            NotFoundError: no such session.
        """
        return messages_of(_LOG.all(self._session, id), id)


class AsyncMessageRepository:
    """Messages on the async API: each call is handed to the sync ``MessageRepository`` in one
    greenlet hop (on a ledger, a transaction of its own; in a unit of work, its own)."""

    def __init__(self, proxied: MessageRepository) -> None:
        self._proxied = proxied

    # --- async proxies of MessageRepository via _proxied ---
    # (generated by tools/generate_async.py; do not edit by hand)
    async def append(
        self, session: SessionRecord | str, messages: MessageInput | Iterable[MessageInput]
    ) -> SessionRecord:
        """Append messages to the conversation; returns the session at its new revision.

        From a record, the append is optimistic: it succeeds only while the record's
        revision is still the stored one. From an id, it is a blind append: it takes
        the session's row lock, bumps the revision and never conflicts.

        Raises:
            ConflictError: from a record, ``stale`` when another writer changed the
                session first, ``deleted`` when it was deleted; none of the messages
                are stored.
            NotFoundError: a blind append to a session that does not exist.
            ValidationError: a message that cannot be stored, named by its index.
        """
        return await spawn(self._proxied.append, session, messages)

    async def replace(
        self, session: SessionRecord, messages: MessageInput | Iterable[MessageInput]
    ) -> SessionRecord:
        """Swap the whole conversation for ``messages`` (compaction), atomically.

        The new messages continue the seqs after the highest ever issued: a seq is
        never reused. Optimistic like ``append`` from a record.

        Raises:
            ConflictError: ``stale`` or ``deleted``, as for ``append``; nothing changes.
            ValidationError: a message that cannot be stored.
        """
        return await spawn(self._proxied.replace, session, messages)

    async def last(self, id: str, n: int) -> list[Message]:
        """The most recent ``n`` messages, in chronological (seq) order.

        Raises:
            NotFoundError: no such session.
        """
        return await spawn(self._proxied.last, id, n)

    async def window(self, id: str, *, after_seq: int = 0, limit: int = 100) -> list[Message]:
        """Up to ``limit`` messages after ``after_seq``, in seq order: page through a long
        conversation by passing the last seq seen.

        Raises:
            NotFoundError: no such session.
        """
        return await spawn(self._proxied.window, id, after_seq=after_seq, limit=limit)

    async def all(self, id: str) -> list[Message]:
        """The whole conversation, in seq order.

        Raises:
            NotFoundError: no such session.
        """
        return await spawn(self._proxied.all, id)

    # --- end of async proxies ---
