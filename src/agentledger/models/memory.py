"""AgentMemoryItem: what an agent remembers across sessions (long-term memory).

One row per item, under a namespace (a path of labels: ``("memories", "ada")``) and a
key, holding a JSON object. Items belong to no session: deleting a session leaves
them; only a delete, or their time to live running out (``expires_at``, purged by
retention), removes them. Each row has its own ``revision`` (the ``version_id_col``),
so a writer may ask to replace only the revision it read. LangGraph's ``Store``
(``agentledger.integrations.langgraph.LedgerStore``) and ADK's memory service
(``agentledger.integrations.adk.LedgerMemoryService``) keep their memories here.
"""

from __future__ import annotations

import warnings
from datetime import datetime
from typing import Any

from sqlalchemy import Double, Index, Integer
from sqlalchemy.orm import Mapped, mapped_column

from .._limits import MAX_MEMORY_KEY_LENGTH, MAX_MEMORY_NAMESPACE_LENGTH
from .base import MYSQL_TABLE_ARGS, Base
from .types import (
    Binary,
    JSONDocument,
    JSONState,
    LongText,
    OrderedIdentifier,
    UTCDateTime,
    nonclustered_primary_key,
    text_indexes,
)

WORDS_TABLE = "agentledger_memory_words"
"""SQLite's FTS5 table over memory items' ``words`` (and its shadow tables, whose names
start with it): made by migration 0006 where SQLite has FTS5, kept by triggers, not a
model, so autogenerate leaves it out."""


class AgentMemoryItem(Base):
    """A memory item, a row of ``agentledger_memory_items``."""

    __tablename__ = "agentledger_memory_items"

    namespace: Mapped[str] = mapped_column(
        OrderedIdentifier(MAX_MEMORY_NAMESPACE_LENGTH), primary_key=True
    )
    """The namespace's labels joined by ``.`` (a ``.`` or ``%`` inside a label written
    ``%2E`` or ``%25``): ``memories.ada``. Sorted byte for byte, so a namespace and
    everything under it (``memories.ada.%``) is one range of the primary key."""
    key: Mapped[str] = mapped_column(OrderedIdentifier(MAX_MEMORY_KEY_LENGTH), primary_key=True)
    """The item's key within its namespace."""
    value: Mapped[dict[str, Any]] = mapped_column(JSONState())
    """The item: a JSON object (JSONB on PostgreSQL, so it can be queried)."""
    text: Mapped[str | None] = mapped_column(LongText())
    """What keyword search reads (ADK's memories: their content as text); None for an
    item that is not searched by keyword."""
    words: Mapped[str | None] = mapped_column(LongText())
    """The distinct words of ``text``, lower-cased, joined by spaces: what the
    database's text index holds (``agentledger0overflow`` alone for more than 100,000
    characters of them). Written with ``text``, never on its own."""
    embedding_paths: Mapped[list[str] | None] = mapped_column(JSONDocument(none_as_null=True))
    """The fields embedded for search by meaning, one path per vector in
    ``embeddings`` (a path may repeat: ``items[*].body`` gives one per element)."""
    embeddings: Mapped[bytes | None] = mapped_column(Binary())
    """The vectors of ``embedding_paths``, in order: little-endian float32, each the
    same length."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    """When the item was first stored (UTC)."""
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    """When the item was last written (UTC)."""
    ttl_minutes: Mapped[float | None] = mapped_column(Double())
    """Its time to live in minutes, counted from its last write (or read, where reads
    refresh it); None: kept until deleted."""
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """When it stops being read and may be purged (UTC); None: never."""
    revision: Mapped[int] = mapped_column(Integer)
    """Optimistic-concurrency version: 1 when first stored, one more per write."""

    __mapper_args__ = {"version_id_col": revision}
    __table_args__ = (
        # Wider than SQL Server's 900 bytes of clustered key: nonclustered there.
        nonclustered_primary_key("namespace", "key"),
        # The sweeper's range: items whose time has run out.
        Index(None, "expires_at"),
        MYSQL_TABLE_ARGS,
    )


TEXT_INDEXES = frozenset(
    str(index.name)
    for index in text_indexes(AgentMemoryItem.__table__.c.words, AgentMemoryItem.__tablename__)
)
"""The names of the text indexes over ``words``, each made on its own database family."""
UNCOMPARED_INDEX_WARNING = (
    f".*expression-based index 'ix_{AgentMemoryItem.__tablename__}_words_tsvector'"
)
"""What Alembic warns when it compares these tables on a database that cannot reflect
PostgreSQL's expression index: agentledger's autogenerate filters leave the index out,
and a host's ``alembic check`` with agentledger's tables in its target need not see it."""
warnings.filterwarnings("ignore", message=UNCOMPARED_INDEX_WARNING, category=UserWarning)
