"""The SDK's ``Session`` on agentledger: ``LedgerSession``, and how items become messages.

An SDK session is an agentledger session whose external key is the SDK's session id
(its id ``openai-agents.<ULID>``), and each item is one message whose content is the
item, exactly as given. An item's own ``id`` (where it has one that names it alone),
with a digest of the item, is its message's key; items without one get a key made for
the call. ``add_items`` runs in ``ledger.run``, so a retry after a lost connection finds
what the lost attempt stored and stores nothing twice; appends from any number of
writers are serialised by the session's row lock, so none is lost and none waits on
another's lock upgrade.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from typing import Any, Final, Literal, Self, cast, get_args

from agents.items import TResponseInputItem
from agents.memory.session import _CompactionSnapshot
from agents.memory.session_settings import (
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)
from agents.models.fake_id import FAKE_RESPONSES_ID
from agents.run_context import RunContextWrapper
from sqlalchemy.ext.asyncio import AsyncEngine

from ..._checks import text_problem
from ..._limits import MAX_ROW_KEY_LENGTH
from ...clock import system_clock
from ...errors import ConflictError, NotFoundError, UsageError, ValidationError
from ...ids import new_id
from ...ledger import AsyncLedger
from ...records import Message, NewMessage, SessionRecord
from ...uow import AsyncUnitOfWork
from .. import Framework, framework_of, new_session_id

FRAMEWORK: Final[Framework] = "openai-agents"
CLEAR_RETRIES = 10
"""How often ``clear_session`` re-reads and tries again when other writers keep
changing the session (each try is one optimistic ``messages.replace``)."""
MAX_ROLE_LENGTH = 255
"""The longest role (and model name) a message or step takes."""
_DIGEST_LENGTH = 16
_ID_LENGTH = MAX_ROW_KEY_LENGTH - _DIGEST_LENGTH - 1


UnseenItems = Literal["append", "refuse"]
"""What ``add_items`` does when other writers added items since this ``LedgerSession``
last read (``get_items``) or wrote: ``"append"`` after them (what the SDK's sessions
do), or ``"refuse"``: raise ``ConflictError`` (reason ``stale``) and store nothing, so
a turn computed on history its writer had not seen is never stored."""


class _Refused(Exception):
    """Carries a refused append's ConflictError past ``ledger.run``, which would retry it."""

    def __init__(self, error: ConflictError) -> None:
        super().__init__(str(error))
        self.error = error


class LedgerSession:
    """An OpenAI Agents SDK ``Session`` stored by agentledger.

    Give it an ``AsyncLedger`` (borrowed: ``close()`` leaves it open), an ``AsyncEngine``
    (the SDK's ``SQLAlchemySession(session_id, engine=...)`` shape; the engine is never
    closed here) or a URL (``from_url``). Used from a new event loop, it lets the
    engine's pooled connections of the old loop go (``dispose(close=False)``).

    The SDK's session id may be any text of 1 to 1,024 characters; with ``app_name``
    and ``user_id`` it is unique within that scope.

    ``unseen_items="refuse"`` makes ``add_items`` refuse to store items on top of
    history this session has not read (``UnseenItems``).

    Every method also takes the SDK's ``wrapper`` keyword (the run context), which
    changes nothing here.
    """

    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        ledger: AsyncLedger | None = None,
        *,
        engine: AsyncEngine | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        app_name: str | None = None,
        user_id: str | None = None,
        unseen_items: UnseenItems = "append",
    ) -> None:
        if unseen_items not in get_args(UnseenItems):
            raise ValidationError(
                f"unseen_items must be 'append' or 'refuse', got {unseen_items!r}",
                path="unseen_items",
            )
        if (ledger is None) == (engine is None):
            raise ValidationError("LedgerSession takes a ledger or an engine", path="ledger")
        if ledger is not None and not isinstance(ledger, AsyncLedger):
            raise ValidationError(
                f"ledger must be an AsyncLedger, got {type(ledger).__name__}", path="ledger"
            )
        if not isinstance(session_id, str):
            raise ValidationError(
                f"session_id must be a string, got {type(session_id).__name__}",
                path="session_id",
            )
        self.session_id = session_id
        """The SDK's session id: the agentledger session's external key."""
        self.session_settings = (
            SessionSettings()
            if session_settings is None
            else coerce_session_settings(session_settings)
        )
        self.app_name = app_name
        """The scope of the key: the agentledger session's app_name."""
        self.user_id = user_id
        """The scope of the key: the agentledger session's user_id."""
        self._owns_ledger = ledger is None
        # The SDK reads what it just wrote: on a ledger with readers, the primary's face.
        self._ledger = ledger.primary if ledger is not None else AsyncLedger(engine=engine)
        self.unseen_items: UnseenItems = unseen_items
        """What ``add_items`` does about items other writers added since this session
        last read or wrote: append after them, or refuse (see ``UnseenItems``)."""
        self._id: str | None = None
        self._seen: SessionRecord | None = None
        self._saw_none = False  # the last read found no session: no item was seen
        self._closed = False

    @classmethod
    def from_url(
        cls,
        session_id: str,
        *,
        url: str,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        app_name: str | None = None,
        user_id: str | None = None,
        unseen_items: UnseenItems = "append",
    ) -> Self:
        """A session on a ledger of its own at ``url`` (closed by ``close()``). A plain
        ``postgresql://``, ``mysql://`` or ``sqlite:///`` URL picks the async driver."""
        session = cls(
            session_id,
            AsyncLedger(url),
            session_settings=session_settings,
            app_name=app_name,
            user_id=user_id,
            unseen_items=unseen_items,
        )
        session._owns_ledger = True
        return session

    @property
    def ledger(self) -> AsyncLedger:
        """The ledger the items are stored in."""
        return self._ledger

    async def record(self) -> SessionRecord:
        """The agentledger session behind this SDK session, created if it does not exist
        yet (for its id, its steps and its usage)."""
        ledger = await self._ready()
        record = await ledger.run(self._session_in)
        self._id = record.id
        return record

    async def ledger_session_id(self) -> str:
        """The id of the agentledger session behind this SDK session (``record().id``,
        remembered after the first call)."""
        await self._ready()
        return self._id if self._id is not None else (await self.record()).id

    async def get_items(
        self, limit: int | None = None, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> list[TResponseInputItem]:
        """The latest ``limit`` items in chronological order; None means
        ``session_settings.limit``, and if that is None too, every item; 0 means none.

        Raises:
            ValidationError: a ``limit`` that is not an int of 0 or more.
        """
        count = resolve_session_limit(limit, self.session_settings)
        if count is not None and (type(count) is not int or count < 0):
            raise ValidationError(f"limit must be an int of 0 or more, got {count!r}", path="limit")
        ledger = await self._ready()
        if count == 0:
            return []
        for _ in range(2):  # again once if the cached session was deleted meanwhile
            id = await self._stored_id(ledger)
            if id is None:
                self._seen, self._saw_none = None, True
                return []
            try:
                found = await self._read(ledger, id, count)
            except NotFoundError:
                self._id = None
                continue
            return [item_of(message) for message in found]
        return []

    async def _read(self, ledger: AsyncLedger, id: str, count: int | None) -> list[Message]:
        """The items, and when unseen items are refused, the session they were read at
        (one snapshot)."""
        if self.unseen_items == "append":
            return await (
                ledger.messages.all(id) if count is None else ledger.messages.last(id, count)
            )
        async with ledger.unit_of_work(readonly=True) as uow:
            self._seen, self._saw_none = await uow.sessions.get(id), False
            return await (uow.messages.all(id) if count is None else uow.messages.last(id, count))

    async def add_items(
        self,
        items: list[TResponseInputItem],
        *,
        wrapper: RunContextWrapper[Any] | None = None,
    ) -> None:
        """Store ``items`` after the session's newest, as one batch in order, creating the
        session on its first items; an empty list changes nothing.

        Raises:
            ValidationError: an item that is not a JSON object (a set, bytes or NaN in
                it, say); nothing of the batch is stored.
            ConflictError: with ``unseen_items="refuse"``, ``stale`` when another writer
                changed the session since this one last read or wrote it (``deleted``
                when it was deleted); nothing of the batch is stored.
        """
        ledger = await self._ready()  # a closed session refuses even an empty batch
        batch = messages_of(items, call_key=new_id(system_clock()))
        if not batch:
            return

        refuse = self.unseen_items == "refuse"
        seen, saw_none = self._seen, self._saw_none

        async def append(uow: AsyncUnitOfWork) -> SessionRecord:
            base = seen if refuse else None
            if refuse and saw_none:
                base = await self._session_in(uow)
                if base.message_count:
                    raise _Refused(_unseen(base.id))
            if base is not None:
                try:
                    return (await uow.messages.append(base, batch)).session
                except ConflictError as error:
                    raise _Refused(error) from error  # not retried: the caller decides
            id = self._id
            if id is not None:
                try:
                    return (await uow.messages.append(id, batch)).session
                except NotFoundError:
                    pass  # deleted meanwhile: find or make the session for the key again
            session = await self._session_in(uow)
            return (await uow.messages.append(session.id, batch)).session

        try:
            written = await ledger.run(append)
        except ValidationError as error:
            raise _in_items_terms(error) from error
        except _Refused as refused:
            raise refused.error from None
        self._id, self._seen, self._saw_none = written.id, written, False

    async def pop_item(
        self, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> TResponseInputItem | None:
        """Remove and return the newest item, None when there is none. Of concurrent
        callers each gets a different item (the pop takes the session's row lock)."""
        ledger = await self._ready()
        for _ in range(2):
            id = await self._stored_id(ledger)
            if id is None:
                return None
            try:
                popped = await ledger.messages.pop(id)
            except NotFoundError:
                self._id = None
                continue
            self._seen, self._saw_none = popped.session, False
            return item_of(popped.messages[0]) if popped.messages else None
        return None

    async def clear_session(self, *, wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Remove every item. The agentledger session stays, with its steps and state;
        the seqs of the removed items are never issued again."""
        ledger = await self._ready()
        id = await self._stored_id(ledger)
        if id is None:
            return

        async def clear(uow: AsyncUnitOfWork) -> SessionRecord | None:
            record = await uow.sessions.get_or_none(id)
            if record is not None and record.message_count:
                return await uow.messages.replace(record, [])
            return record

        cleared = await ledger.run(clear, retries=CLEAR_RETRIES)
        self._seen, self._saw_none = cleared, cleared is None

    # -- the SDK's compaction hooks (OpenAIResponsesCompactionSession looks for them) ---

    async def _atomic_replace_items(self, items: list[TResponseInputItem]) -> bool:
        """Replace the whole history with ``items`` in one transaction: a reader sees
        the old history or the new one, never the gap a clear-then-add leaves (the
        SDK's hook for a compaction of the whole history). Like the SDK's own stores it
        does not check which history was compacted: ``_get_compaction_snapshot``'s
        replacement does."""
        batch = messages_of(items, call_key=new_id(system_clock()))
        ledger = await self._ready()

        async def swap(uow: AsyncUnitOfWork) -> SessionRecord:
            return await uow.messages.replace(await self._session_in(uow), batch)

        try:
            written = await ledger.run(swap, retries=CLEAR_RETRIES)
        except ValidationError as error:
            raise _in_items_terms(error) from error
        self._id, self._seen, self._saw_none = written.id, written, False
        return True

    async def _get_compaction_snapshot(
        self,
        limit: int,
        *,
        prune_prefix: Callable[[TResponseInputItem], bool] | None = None,
    ) -> _CompactionSnapshot | None:
        """The newest ``limit`` items as one snapshot, with the SDK's atomic suffix
        replacement: ``replace_suffix(start, output)`` swaps the snapshot's items from
        ``start`` on for ``output`` in one transaction, only while they are still the
        newest (a writer's item added since survives: the replacement is skipped and
        says so, returning False). ``prune_prefix`` (the SDK's encrypted session: its
        expired items) drops the oldest items it accepts, up to the first it does not,
        in the same transaction."""
        ledger = await self._ready()
        id = await self._stored_id(ledger)
        if id is None:
            return _CompactionSnapshot(items=[], complete=True, replace_suffix=_nothing_to_replace)
        conversation = await ledger.messages.conversation(id, last=limit + 1)
        complete = len(conversation.messages) <= limit
        rows = conversation.messages[-limit:] if limit else []

        async def replace_suffix(start: int, output: list[TResponseInputItem]) -> bool:
            expected = rows[start:]
            if not expected:
                return False
            batch = messages_of(output, call_key=new_id(system_clock()))

            async def replace(uow: AsyncUnitOfWork) -> SessionRecord | None:
                record = await uow.sessions.get_or_none(id)
                newest = await uow.messages.last(id, len(expected)) if record else []
                if record is None or [m.seq for m in newest] != [m.seq for m in expected]:
                    return None  # changed since the snapshot: leave it as it is
                before = await _pruned_prefix(uow, id, expected[0].seq, prune_prefix)
                if before is not None:
                    return await uow.messages.replace(record, [*before, *batch])
                popped = await uow.messages.pop(record, len(expected))
                if not batch:
                    return popped.session
                return (await uow.messages.append(popped.session, batch)).session

            try:
                written = await ledger.run(replace, retries=CLEAR_RETRIES)
            except ValidationError as error:
                raise _in_items_terms(error) from error
            if written is None:
                return False
            self._id, self._seen, self._saw_none = written.id, written, False
            return True

        items = [item_of(message) for message in rows]
        return _CompactionSnapshot(items=items, complete=complete, replace_suffix=replace_suffix)

    async def close(self) -> None:
        """Close the ledger if this session made it (``from_url``, ``engine=``); a
        borrowed ledger stays open. A closed session refuses every call."""
        if self._closed:
            return
        self._closed = True
        if self._owns_ledger:
            await self._ledger.close()

    async def _ready(self) -> AsyncLedger:
        if self._closed:
            raise UsageError(f"{type(self).__name__} is closed (session {self.session_id!r})")
        return self._ledger

    async def _stored_id(self, ledger: AsyncLedger) -> str | None:
        if self._id is None:
            found = await ledger.sessions.get_by_key_or_none(
                self.session_id, app_name=self.app_name, user_id=self.user_id
            )
            if found is not None:
                self._check_framework(found)
                self._id = found.id
        return self._id

    async def _session_in(self, uow: AsyncUnitOfWork) -> SessionRecord:
        session, _ = await uow.sessions.get_or_create_by_key(
            self.session_id,
            app_name=self.app_name,
            user_id=self.user_id,
            id=new_session_id(FRAMEWORK, self._ledger.settings.now()),
        )
        self._check_framework(session)
        return session

    def _check_framework(self, session: SessionRecord) -> None:
        framework = framework_of(session.id)
        if framework is not None and framework != FRAMEWORK:
            raise ConflictError(
                f"the key {self.session_id!r} in this scope belongs to {framework} session "
                f"{session.id!r}, not to an OpenAI Agents SDK session",
                reason="exists",
                id=session.id,
            )


async def _nothing_to_replace(start: int, output: list[TResponseInputItem]) -> bool:
    """The suffix replacement of an empty snapshot: there is nothing to replace."""
    return False


async def _pruned_prefix(
    uow: AsyncUnitOfWork,
    id: str,
    below: int,
    prune: Callable[[TResponseInputItem], bool] | None,
) -> list[Message] | None:
    """The messages before seq ``below`` that stay once ``prune`` dropped the oldest
    it accepts (up to the first it does not), to be stored again as they are; None
    when it drops nothing (the prefix stays where it is)."""
    if prune is None:
        return None
    prefix = [m for m in await uow.messages.all(id) if m.seq < below]
    dropped = 0
    for message in prefix:
        if not prune(item_of(message)):
            break
        dropped += 1
    return prefix[dropped:] if dropped else None


def _unseen(id: str) -> ConflictError:
    return ConflictError(
        f"session {id!r} got items from another writer after this one found it empty",
        reason="stale",
        id=id,
    )


def messages_of(items: object, *, call_key: str) -> list[NewMessage]:
    """The messages that store ``items``: each item as the content of one message, its
    role the item's ``role`` (else its ``type``), its key the item's own ``id`` and a
    digest of the item where it has an id, else ``call_key`` and the item's index."""
    if not isinstance(items, Sequence) or isinstance(items, str | bytes):
        raise ValidationError(
            f"items must be a list of items, got {type(items).__name__}", path="items"
        )
    result = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValidationError(
                f"items[{index}] is a {type(item).__name__}, not an item (a dict)",
                path=f"items[{index}]",
            )
        key = _own_key(item)
        if key is None or key in seen:
            key = f"{call_key}.{index}"
        seen.add(key)
        result.append(NewMessage(role=_role_of(item), content=item, external_key=key))
    return result


def _in_items_terms(error: ValidationError) -> ValidationError:
    """The error of a refused message, naming the item (``items[2]['content']``)."""
    path = error.path or ""
    match = re.match(r"messages\[(\d+)\](?:\.content)?", path)
    if match is None:
        return error
    where = f"items[{match.group(1)}]" + path[match.end() :]
    return ValidationError(where + str(error).removeprefix(path), path=where)


def item_of(message: Message) -> TResponseInputItem:
    """The item a message stores: its content as stored, or for a message written some
    other way (content that is not an object), a message item of its role."""
    if isinstance(message.content, dict):
        return cast(TResponseInputItem, message.content)
    return cast(TResponseInputItem, {"role": message.role, "content": message.content})


def _own_key(item: dict[str, Any]) -> str | None:
    """An item's key from its own id: the id and a digest of the item, so that the same
    item stored again is found, while another item under a reused id (some providers
    reuse them) is stored rather than refused. None for an item without an id, with the
    SDK's placeholder id, or with one no database stores exactly."""
    value = item.get("id")
    if not isinstance(value, str) or value == FAKE_RESPONSES_ID:
        return None
    if not 1 <= len(value) <= _ID_LENGTH or text_problem(value) is not None:
        return None
    text = json.dumps(item, sort_keys=True, ensure_ascii=False, default=repr)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_LENGTH]
    return f"{value}#{digest}"


def _role_of(item: dict[str, Any]) -> str:
    for field in ("role", "type"):
        value = item.get(field)
        if isinstance(value, str) and 1 <= len(value) <= MAX_ROLE_LENGTH and "\x00" not in value:
            return value
    return "item"


__all__ = ["LedgerSession", "UnseenItems", "item_of", "messages_of"]
