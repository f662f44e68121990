"""LangGraph checkpoints: the storage behind ``agentledger.integrations.langgraph``.

A LangGraph thread is a session found by its external key (the thread id) in the
repository's scope (``app_name``, ``user_id``); a thread's first ``put`` creates it
with an id from ``new_session_id("langgraph")``. Each checkpoint is a row keyed by
(session, namespace, checkpoint id) holding the serialized checkpoint without its
channel values; each channel value is a row keyed by (session, namespace, channel,
version), written once and shared by every checkpoint that has that version, so a
step that changes one channel stores one value. Pending writes are rows keyed by
(session, namespace, checkpoint id, task id, index).

The repository knows nothing of LangGraph's types: values arrive serialized, as
``(type tag, bytes)`` pairs, and leave the same way; the adapter owns the serializer.

The wing: ``values`` (the tables, stored shapes and the codec, and checkpoints
assembled from rows already read: no I/O), ``statements`` (every statement, prebuilt
once) and ``repository`` (the operations, and the reads they make);
their async face, ``AsyncLangGraphRepository``, is generated with the other
repositories' in ``repositories._async`` and importable from here too.

What LangGraph hands a saver, and the rule each follows (issue "LangGraph II"):

- Channel values and writes may be anything LangGraph's serializer takes (tuples,
  sets, bytes, datetimes, models): they arrive here as bytes, never as JSON.
- Metadata and a ``list`` filter are JSON as LangGraph's SQL savers make them:
  ``json.dumps`` and back, in the adapter (tuples become lists, non-string keys
  strings; ``counters_since_delta_snapshot`` holds tuples). What JSON cannot hold (a
  set, bytes, a datetime, NaN) is refused with its path, as those savers refuse it.
- A bind whose type the database must infer is typed: a channel that lost its value
  (a consumed trigger) is a NULL blob, and in the one-statement write's ``UNION ALL``
  a NULL sent without a type is text to PostgreSQL, so nullable non-string binds
  there are cast to their column's type (``statements._union_bind``).
- A batch never carries one key twice to a statement: a checkpoint's channels are a
  dict's keys; ``put_writes`` keeps, of one index written twice in a batch (a node
  that interrupts twice writes ``__resume__`` twice), the first regular write and
  the last special one, as writing them one by one would.
- Thread ids, namespaces, checkpoint ids and channels are strings within their column
  limits; anything else is refused, nothing of the call stored.
"""

from ...langgraph_records import PruneStrategy, StoredCheckpoint, StoredWrite, Typed
from .._async import AsyncLangGraphRepository
from .repository import TOUCH_EVERY, LangGraphRepository
from .values import COMPRESS_FROM, COMPRESSED

__all__ = [
    "COMPRESSED",
    "COMPRESS_FROM",
    "TOUCH_EVERY",
    "AsyncLangGraphRepository",
    "LangGraphRepository",
    "PruneStrategy",
    "StoredCheckpoint",
    "StoredWrite",
    "Typed",
]
