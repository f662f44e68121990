"""agentledger as Google ADK's session service: ``LedgerSessionService``.

ADK's (app name, user id, session id) is the key of an agentledger session: its
``app_name``, ``user_id`` and external key, with an id from ``new_session_id("adk")``.
State keys prefixed ``app:`` live in the app's state (``ledger.app_state``), ``user:``
in the user's (``ledger.user_state``), plain keys in the session's state; ``temp:``
keys are never stored. An event is a message: its author is the role, its content the
content, the rest of the event the metadata, its id the idempotency key and its
timestamp the message's time. ``append_event`` writes the message and the event's
state deltas in one unit of work, moving the session's revision by one; the revision
is the marker a session object carries (ADK's ``_storage_update_marker``), so a writer
whose session object another writer has superseded gets ADK's ``StaleSessionError``.

Needs the ``adk`` extra (``google-adk`` 2.x). ``register()`` adds the
``agentledger+<url>`` session service URI scheme to ADK's service registry, for
``adk web`` and ``adk api_server`` (``--session_service_uri``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Final, TypeVar

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.platform import uuid as platform_uuid
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from google.adk.sessions.state import State
from pydantic_core import PydanticSerializationError
from sqlalchemy.engine import URL

from .. import (
    Appended,
    AppState,
    AsyncLedger,
    AsyncUnitOfWork,
    ConflictError,
    Message,
    NewMessage,
    SessionRecord,
    UserState,
    ValidationError,
)
from . import framework_of, new_session_id
from ._adk_uri import SCHEME_PREFIX, SCHEMES, database_url, ledger_of
from .adk_memory import LedgerMemoryService, memory_from_uri

R = TypeVar("R")

_PAGE: Final = 1000
_KNOWN: Final = 1024
"""How many session records a service keeps by revision marker, the newest used."""
_STALE = (
    "the session has been modified in storage since it was loaded; reload it "
    "(get_session) before appending more events"
)


def _scoped(state: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """ADK state split into (session, app, user) state without prefixes; ``temp:`` keys
    dropped."""
    session: dict[str, Any] = {}
    app: dict[str, Any] = {}
    user: dict[str, Any] = {}
    for key, value in (state or {}).items():
        if key.startswith(State.APP_PREFIX):
            app[key.removeprefix(State.APP_PREFIX)] = value
        elif key.startswith(State.USER_PREFIX):
            user[key.removeprefix(State.USER_PREFIX)] = value
        elif not key.startswith(State.TEMP_PREFIX):
            session[key] = value
    return session, app, user


def _merged(session: dict[str, Any], app: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    """ADK's view of the three states: session keys, then ``app:`` and ``user:`` keys."""
    merged = dict(session)
    merged.update({State.APP_PREFIX + key: value for key, value in app.items()})
    merged.update({State.USER_PREFIX + key: value for key, value in user.items()})
    return merged


def _marker(record: SessionRecord) -> str:
    """The revision marker of a stored session: its id (a session deleted and created
    again under the same ADK id is another one) and revision."""
    return f"{record.id}@{record.revision}"


def _key_of(record: SessionRecord) -> tuple[str | None, str | None, str | None]:
    return record.app_name, record.user_id, record.external_key


def _time(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, UTC)


def _last_update_time(updated_at: datetime, last_event_at: datetime | None) -> float:
    """ADK's ``last_update_time``: the timestamp of the session's newest event, as
    ``DatabaseSessionService`` stores it (an event carries its own time); the storage
    time of a session with no event. (Stale writers are caught by the revision marker,
    not by this time.)"""
    return (last_event_at or updated_at).timestamp()


def _ends_with_newest(messages: list[Message], record: SessionRecord) -> bool:
    """Whether the messages read end with the session's newest (its last seq)."""
    return bool(messages) and messages[-1].seq == record.message_seq


def _event_of(message: Message) -> Event:
    data = dict(message.metadata)
    if message.content is not None:
        data["content"] = message.content
    return Event.model_validate(data)


def _message_of(event: Event, stored_delta: dict[str, Any]) -> NewMessage:
    """The message that stores ``event``, its state delta replaced by ``stored_delta``
    (the delta without ``temp:`` keys)."""
    actions = event.actions.model_copy(update={"state_delta": stored_delta})
    try:
        data = event.model_copy(update={"actions": actions}).model_dump(
            exclude_none=True, mode="json"
        )
    except PydanticSerializationError as error:
        raise ValidationError(
            f"event {event.id!r} cannot be serialized as JSON: {error}", path="event"
        ) from None
    content = data.pop("content", None)
    return NewMessage(
        role=event.author or "adk",
        content=content,
        metadata=data,
        created_at=_time(event.timestamp),
        external_key=event.id or None,
    )


def _delta(values: dict[str, Any]) -> dict[str, Any] | None:
    return {"set": values} if values else None


class LedgerSessionService(BaseSessionService):
    """ADK's session service on agentledger: sessions, events and scoped state in your
    own database, under agentledger's migrations.

    Args:
        ledger: an ``AsyncLedger`` (borrowed: ``close`` leaves it open) or a database
            URL (the service makes its ledger and closes it in ``close``); None is
            ``AGENTLEDGER_DATABASE_URL``, else ``sqlite:///agentledger.db``.
    """

    def __init__(self, ledger: AsyncLedger | str | URL | None = None) -> None:
        self.ledger, self._owns_ledger = ledger_of(ledger, "LedgerSessionService")
        # The records the session objects handed out were read at, by marker: an append
        # from one of them needs no read first (its revision check is the UPDATE's).
        self._known: OrderedDict[str, SessionRecord] = OrderedDict()

    def _remember(self, record: SessionRecord) -> None:
        marker = _marker(record)
        self._known[marker] = record
        self._known.move_to_end(marker)
        if len(self._known) > _KNOWN:
            self._known.popitem(last=False)

    async def close(self) -> None:
        """Close the ledger if this service made it (from a URL); a borrowed one is left."""
        if self._owns_ledger:
            await self.ledger.close()

    async def __aenter__(self) -> LedgerSessionService:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def _run(self, fn: Callable[[AsyncUnitOfWork], Awaitable[R]]) -> R:
        """``fn`` in one write unit of work, run again after a deadlock or a lost race."""
        return await self.ledger.run(fn)

    @staticmethod
    async def _find(
        uow: AsyncUnitOfWork, app_name: str, user_id: str, session_id: str
    ) -> SessionRecord | None:
        """The ADK session ``session_id``: surrounding whitespace stripped, as ADK's own
        services strip it, unless a session was stored under the padded id itself (by
        a version that kept it, as ADK's SQLite service reads ``DatabaseSessionService``'s)."""
        stripped = session_id.strip() if session_id else session_id
        keys: list[str] = [session_id] if stripped == session_id else [session_id, stripped]
        for key in keys:
            record = await uow.sessions.get_by_key_or_none(key, app_name=app_name, user_id=user_id)
            if record is not None and framework_of(record.id) == "adk":
                return record
        return None

    def _session_of(
        self,
        record: SessionRecord,
        app: AppState,
        user: UserState,
        events: list[Event] | None = None,
        last_event_at: datetime | None = None,
    ) -> Session:
        assert record.app_name is not None and record.user_id is not None
        assert record.external_key is not None
        session = Session(
            id=record.external_key,
            app_name=record.app_name,
            user_id=record.user_id,
            state=_merged(record.state, app.state, user.state),
            events=events or [],
            last_update_time=_last_update_time(record.updated_at, last_event_at),
        )
        session._storage_update_marker = _marker(record)
        self._remember(record)
        return session

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """A new session (``session_id`` without surrounding whitespace, as ADK's own
        services store it; else a generated uuid) with ``state``: its ``app:`` and
        ``user:`` keys are merged into the app's and user's state, in the same
        transaction.

        Raises:
            AlreadyExistsError: the user already has a session ``session_id`` in the app.
            agentledger.ValidationError: state that is not JSON, an app name or user id
                that is not 1 to 255 characters, an id that is not 1 to 1,024.
        """
        key = (session_id.strip() if session_id else None) or platform_uuid.new_uuid()
        own, app_delta, user_delta = _scoped(state)

        async def create(uow: AsyncUnitOfWork) -> Session:
            record = await uow.sessions.create(
                new_session_id("adk", self.ledger.settings.now()),
                app_name=app_name,
                user_id=user_id,
                state=own,
                external_key=key,
            )
            app = await (
                uow.app_state.merge(app_name, {"set": app_delta})
                if app_delta
                else uow.app_state.get(app_name)
            )
            user = await (
                uow.user_state.merge(app_name, user_id, {"set": user_delta})
                if user_delta
                else uow.user_state.get(app_name, user_id)
            )
            return self._session_of(record, app, user)

        try:
            return await self._run(create)
        except ConflictError as error:
            if error.reason != "exists":
                raise
            raise AlreadyExistsError(f"Session with id {key} already exists.") from error

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """The session with its merged state and its events (all of them, or as
        ``config`` selects: the ``num_recent_events`` newest, those at or after
        ``after_timestamp``, or the newest of those), oldest first; None when there is
        no such session. One read-only snapshot."""
        async with self.ledger.unit_of_work(readonly=True) as uow:
            record = await self._find(uow, app_name, user_id, session_id)
            if record is None:
                return None
            messages = await self._messages(uow, record.id, config or GetSessionConfig())
            newest = messages[-1:] if _ends_with_newest(messages, record) else None
            if newest is None and record.message_count:
                newest = await uow.messages.last(record.id, 1)
            app = await uow.app_state.get(app_name)
            user = await uow.user_state.get(app_name, user_id)
        events = [_event_of(m) for m in messages]
        last_event_at = newest[0].created_at if newest else None
        return self._session_of(record, app, user, events, last_event_at)

    @staticmethod
    async def _messages(uow: AsyncUnitOfWork, id: str, config: GetSessionConfig) -> list[Message]:
        last, after = config.num_recent_events, config.after_timestamp
        if last == 0:
            return []
        if after is not None:
            return await uow.messages.since(id, _time(after), last=last)
        if last is not None:
            return await uow.messages.last(id, last)
        return await uow.messages.all(id)

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """The app's sessions of ``user_id`` (every user's when None), without events,
        with their merged state; least recently updated first. One read-only snapshot."""
        async with self.ledger.unit_of_work(readonly=True) as uow:
            records: list[Any] = []
            cursor = None
            while True:
                page = await uow.sessions.list(
                    app_name=app_name,
                    user_id=user_id,
                    limit=_PAGE,
                    cursor=cursor,
                    include=["external_key", "state", "last_message_at"],
                )
                records.extend(s for s in page.items if framework_of(s.id) == "adk")
                cursor = page.next_cursor
                if cursor is None:
                    break
            app = await uow.app_state.get(app_name)
            users = {
                user: (await uow.user_state.get(app_name, user)).state
                for user in sorted({s.user_id for s in records})
            }
        sessions = [
            Session(
                id=summary.external_key,
                app_name=app_name,
                user_id=summary.user_id,
                state=_merged(summary.state or {}, app.state, users[summary.user_id]),
                last_update_time=_last_update_time(summary.updated_at, summary.last_message_at),
            )
            for summary in records
        ]
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete the session with its events; its app and user state stay. Deleting a
        session that does not exist does nothing."""

        async def delete(uow: AsyncUnitOfWork) -> None:
            record = await self._find(uow, app_name, user_id, session_id)
            if record is not None:
                await uow.sessions.delete(record.id)

        await self._run(delete)

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state in the app, keys without the ``user:`` prefix; empty when
        none is stored."""
        return dict((await self.ledger.user_state.get(app_name, user_id)).state)

    async def append_event(self, session: Session, event: Event) -> Event:
        """Store ``event`` and apply its state delta to the session's, the user's and the
        app's state, in one transaction; then update ``session`` as ADK does (``temp:``
        keys are applied to it but never stored). A partial event is returned untouched.

        Raises:
            StaleSessionError: another writer changed the session since ``session`` was
                read (or ``session`` was never read from this service and its last event
                is not the stored one); nothing is stored.
            SessionNotFoundError: no such session (it was never created, or deleted).
            agentledger.ValidationError: a state value that is not JSON, an event that
                cannot be serialized; nothing is stored.
        """
        if event.partial:
            return event
        stored_delta = {
            key: value
            for key, value in (event.actions.state_delta or {}).items()
            if not key.startswith(State.TEMP_PREFIX)
        }
        message = _message_of(event, stored_delta)
        own, app_delta, user_delta = _scoped(stored_delta)
        deltas = {
            "state_delta": _delta(own),
            "app_state_delta": _delta(app_delta),
            "user_state_delta": _delta(user_delta),
        }

        async def append(uow: AsyncUnitOfWork) -> Appended:
            record = await self._find(uow, session.app_name, session.user_id, session.id)
            if record is None:
                raise SessionNotFoundError(f"Session {session.id} not found.")
            if not await self._current(uow, record, session, message):
                raise StaleSessionError(_STALE)
            return await uow.messages.append(record, message, **deltas)

        marker = session._storage_update_marker
        known = self._known.get(marker) if marker is not None else None
        if known is not None and _key_of(known) == (session.app_name, session.user_id, session.id):
            # The record the session was read at: the append's versioned UPDATE is the
            # whole check, in one ledger call.
            try:
                appended = await self.ledger.messages.append(known, message, **deltas)
            except ConflictError as error:
                if error.reason == "stale":
                    raise StaleSessionError(_STALE) from error
                if error.reason != "deleted":
                    raise
                appended = await self._run(append)  # deleted, or deleted and made again
        else:
            appended = await self._run(append)
        if marker is not None:
            self._known.pop(marker, None)
        self._remember(appended.session)
        if any(seen.id == event.id for seen in session.events):
            return event  # delivered again: stored once (its key), on the session once
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        self._commit_event_to_session(session, event)
        (stored,) = appended.messages
        session.last_update_time = _last_update_time(appended.session.updated_at, stored.created_at)
        session._storage_update_marker = _marker(appended.session)
        return event

    @staticmethod
    async def _current(
        uow: AsyncUnitOfWork, record: SessionRecord, session: Session, message: NewMessage
    ) -> bool:
        """Whether ``session`` shows the stored revision ``record``: its marker is the
        record's, or (a retry whose commit had an unknown outcome) the record is one
        revision on and that revision stored this very event; a session without a marker
        (not read from this service) must end with the stored last event."""
        marker = session._storage_update_marker
        if marker == _marker(record):
            return True
        newest = await uow.messages.last(record.id, 1)
        newest_key = newest[0].external_key if newest else None
        if marker is None:
            return newest_key == (session.events[-1].id if session.events else None)
        retried = f"{record.id}@{record.revision - 1}"
        return (
            marker == retried
            and message.external_key is not None
            and (newest_key == message.external_key)
        )


def from_uri(uri: str, **_: Any) -> LedgerSessionService:
    """The service for a session service URI (``agentledger+sqlite:///agents.db``, say):
    the factory ``register`` gives ADK's registry; other arguments ADK passes (its
    ``agents_dir``) are ignored."""
    return LedgerSessionService(database_url(uri, "session"))


def register() -> None:
    """Add the ``agentledger+...`` URI schemes to ADK's service registry, for sessions
    and memory, so ``adk web --session_service_uri agentledger+sqlite:///agents.db
    --memory_service_uri agentledger+sqlite:///agents.db`` runs on agentledger (call it
    from the agents folder's ``services.py``)."""
    from google.adk.cli.service_registry import get_service_registry

    registry = get_service_registry()
    for scheme in SCHEMES:
        registry.register_session_service(scheme, from_uri)
        registry.register_memory_service(scheme, memory_from_uri)


__all__ = [
    "SCHEMES",
    "SCHEME_PREFIX",
    "LedgerMemoryService",
    "LedgerSessionService",
    "from_uri",
    "memory_from_uri",
    "register",
]
