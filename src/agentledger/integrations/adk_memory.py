"""ADK's memory service on agentledger: ``LedgerMemoryService``, on ``ledger.memory``.

Each memory is an item under the namespace ``("adk", app_name, user_id)``: an event's
text parts with its author, time and session, keyed by the event's id (so adding a
session again, or an event twice, stores it once), or an entry given to ``add_memory``
under its id (a new one when it has none). Its words, lower-cased, are the item's
``text``; ``search_memory`` scores each of the user's memories by how many of the
query's words it holds (a whole word; a word in a script without spaces, such as
Chinese or Japanese, anywhere in the text), as ADK's in-memory service does, best
first, then newest, at most ``max_results``. The words are matched by agentledger on
every database alike (the same answer on SQLite, PostgreSQL and MariaDB).

Deletes: ``delete_memory`` one memory by the id ``search_memory`` gave, or every
memory of the user when no id is given; ``delete_session_memories`` those of one
session (a user's right to have a conversation forgotten).
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from google.adk.events.event import Event
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.session import Session
from google.genai import types
from sqlalchemy.engine import URL

from .. import AsyncLedger, MemoryItem, ValidationError
from ._adk_uri import database_url, ledger_of

NAMESPACE: Final = "adk"
"""The first label of every ADK memory's namespace: ``("adk", app_name, user_id)``."""
DEFAULT_MAX_RESULTS: Final = 10
"""How many memories a search returns unless told (ADK's in-memory service's 10)."""
_WORD = re.compile(r"\w+")
_READ_AT_ONCE = 10_000


def _words(text: str) -> set[str]:
    return {word.lower() for word in _WORD.findall(unicodedata.normalize("NFC", text))}


def _text_of(content: types.Content | None) -> str:
    """The text parts of ``content`` (thoughts left out), joined by spaces."""
    if content is None or not content.parts:
        return ""
    parts = [part.text for part in content.parts if part.text and not part.thought]
    return " ".join(text.replace("\n", " ") for text in parts)


def _matches(query: set[str], text: str) -> int:
    """How many of the query's words ``text`` holds: as a word, or (a word outside
    ASCII, from a script written without spaces) anywhere in it."""
    held = _words(text)
    lowered = unicodedata.normalize("NFC", text).lower()
    return sum(1 for word in query if word in held or (not word.isascii() and word in lowered))


def _timestamp(seconds: float | None) -> str | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC).isoformat()


class LedgerMemoryService(BaseMemoryService):
    """ADK's ``BaseMemoryService`` on agentledger, every method of it.

    Args:
        ledger: an ``AsyncLedger`` (borrowed: ``close`` leaves it open) or a database
            URL (the service makes its ledger and closes it in ``close``); None is
            ``AGENTLEDGER_DATABASE_URL``, else ``sqlite:///agentledger.db``.
        max_results: how many memories a search returns at most.
    """

    def __init__(
        self,
        ledger: AsyncLedger | str | URL | None = None,
        *,
        max_results: int = DEFAULT_MAX_RESULTS,
    ) -> None:
        self.ledger, self._owns_ledger = ledger_of(ledger, "LedgerMemoryService")
        if isinstance(max_results, bool) or not isinstance(max_results, int) or max_results < 1:
            raise ValidationError(
                f"max_results must be a positive int, got {max_results!r}", path="max_results"
            )
        self.max_results = max_results

    async def close(self) -> None:
        """Close the ledger if this service made it (from a URL); a borrowed one is left."""
        if self._owns_ledger:
            await self.ledger.close()

    @staticmethod
    def _namespace(app_name: str, user_id: str) -> tuple[str, str, str]:
        return (NAMESPACE, app_name, user_id)

    async def add_session_to_memory(self, session: Session) -> None:
        """Remember the session's events that hold text (again: each once)."""
        await self.add_events_to_memory(
            app_name=session.app_name,
            user_id=session.user_id,
            events=session.events,
            session_id=session.id,
        )

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Remember these events that hold text, each under its id (an event added
        again replaces itself), in one transaction."""
        namespace = self._namespace(app_name, user_id)
        kept = [(event, _text_of(event.content)) for event in events]
        kept = [(event, text) for event, text in kept if text]
        if not kept:
            return
        metadata = dict(custom_metadata or {})

        async def store(uow: Any) -> None:
            for event, text in kept:
                await uow.memory.put(
                    namespace,
                    event.id or uuid.uuid4().hex,
                    {
                        "content": event.content.model_dump(mode="json", exclude_none=True)
                        if event.content is not None
                        else None,
                        "author": event.author,
                        "timestamp": event.timestamp,
                        "session_id": session_id,
                        "custom_metadata": metadata,
                    },
                    text=text.lower(),
                )

        await self.ledger.run(store)

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Remember these entries as they are, each under its id (a new one for an
        entry without), in one transaction."""
        namespace = self._namespace(app_name, user_id)
        shared = dict(custom_metadata or {})

        async def store(uow: Any) -> None:
            for entry in memories:
                if not isinstance(entry, MemoryEntry):
                    raise ValidationError(
                        f"memories holds a {type(entry).__name__}, not a MemoryEntry",
                        path="memories",
                    )
                await uow.memory.put(
                    namespace,
                    entry.id or uuid.uuid4().hex,
                    {
                        "content": entry.content.model_dump(mode="json", exclude_none=True),
                        "author": entry.author,
                        "timestamp": entry.timestamp,
                        "session_id": None,
                        "custom_metadata": {**shared, **entry.custom_metadata},
                    },
                    text=_text_of(entry.content).lower(),
                )

        await self.ledger.run(store)

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        """The user's memories that hold the query's words, those holding the most
        first, then the newest; at most ``max_results``."""
        words = _words(query)
        if not words:
            return SearchMemoryResponse(memories=[])
        scored: list[tuple[int, MemoryItem]] = []
        offset = 0
        while True:  # every memory of the user, newest first, a page at a time
            page = await self.ledger.memory.search(
                self._namespace(app_name, user_id), limit=_READ_AT_ONCE, offset=offset
            )
            scored += [(_matches(words, item.text or ""), item) for item in page]
            if len(page) < _READ_AT_ONCE:
                break
            offset += len(page)
        ranked = sorted(
            (pair for pair in scored if pair[0]), key=lambda pair: -pair[0]
        )  # stable: newest first among equals
        return SearchMemoryResponse(
            memories=[_entry(item) for _, item in ranked[: self.max_results]]
        )

    async def delete_memory(
        self, *, app_name: str, user_id: str, memory_id: str | None = None
    ) -> None:
        """Forget one memory (its id as ``search_memory`` gave it), or every memory of
        the user when ``memory_id`` is None."""
        namespace = self._namespace(app_name, user_id)
        if memory_id is None:
            await self.ledger.memory.delete_all(namespace)
        elif memory_id:
            await self.ledger.memory.delete(namespace, memory_id)

    async def delete_session_memories(self, *, app_name: str, user_id: str, session_id: str) -> int:
        """Forget what the user's session ``session_id`` added; how many memories."""
        deleted: int = await self.ledger.memory.delete_all(
            self._namespace(app_name, user_id), filter={"session_id": session_id}
        )
        return deleted


def _entry(item: MemoryItem) -> MemoryEntry:
    value = item.value
    timestamp = value.get("timestamp")
    return MemoryEntry(
        id=item.key,
        content=types.Content.model_validate(value.get("content") or {}),
        author=value.get("author"),
        timestamp=_timestamp(timestamp) if isinstance(timestamp, int | float) else timestamp,
        custom_metadata=dict(value.get("custom_metadata") or {}),
    )


def memory_from_uri(uri: str, **_: Any) -> LedgerMemoryService:
    """The service for a memory service URI (``agentledger+sqlite:///agents.db``): the
    factory ``register`` gives ADK's registry; ADK's other arguments are ignored."""
    return LedgerMemoryService(database_url(uri, "memory"))
