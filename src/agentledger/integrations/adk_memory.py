"""ADK's memory service on agentledger: ``LedgerMemoryService``, on ``ledger.memory``.

Each memory is an item under the namespace ``("adk", app_name, user_id)``: an event's
text parts with its author, time and session, keyed by the event's id (so adding a
session again, or an event twice, stores it once), or an entry given to ``add_memory``
under its id (a new one when it has none). Its text parts are the item's ``text``;
``search_memory`` is the memory repository's keyword search: the user's memories that
hold the most of the query's words (a whole word, whatever its case; a word in a
script without spaces, such as Chinese or Japanese, anywhere in the text), as ADK's
in-memory service scores them, then the newest, at most ``max_results``. It reads
through each database's own text index (SQLite FTS5, PostgreSQL full-text search,
MariaDB/MySQL FULLTEXT) where it can, with the same answer on every database.

Deletes: ``delete_memory`` one memory by the id ``search_memory`` gave, or every
memory of the user when no id is given; ``delete_session_memories`` those of one
session (a user's right to have a conversation forgotten).
"""

from __future__ import annotations

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
from .._limits import MAX_MEMORY_PAGE
from ._adk_uri import database_url, ledger_of

NAMESPACE: Final = "adk"
"""The first label of every ADK memory's namespace: ``("adk", app_name, user_id)``."""
DEFAULT_MAX_RESULTS: Final = 10
"""How many memories a search returns unless told (ADK's in-memory service's 10)."""


def _text_of(content: types.Content | None) -> str:
    """The text parts of ``content`` (thoughts left out), joined by spaces."""
    if content is None or not content.parts:
        return ""
    parts = [part.text for part in content.parts if part.text and not part.thought]
    return " ".join(text.replace("\n", " ") for text in parts)


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
        if (
            isinstance(max_results, bool)
            or not isinstance(max_results, int)
            or not 1 <= max_results <= MAX_MEMORY_PAGE
        ):
            raise ValidationError(
                f"max_results must be an int from 1 to {MAX_MEMORY_PAGE:,}, got {max_results!r}",
                path="max_results",
            )
        self.max_results = max_results
        self.ledger, self._owns_ledger = ledger_of(ledger, "LedgerMemoryService")

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
                    text=text,
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
                    text=_text_of(entry.content),
                )

        await self.ledger.run(store)

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        """The user's memories that hold the query's words, those holding the most
        first, then the newest; at most ``max_results``."""
        found = await self.ledger.memory.search(
            self._namespace(app_name, user_id), words=query, limit=self.max_results
        )
        return SearchMemoryResponse(memories=[_entry(item) for item in found])

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
