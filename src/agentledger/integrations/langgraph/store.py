"""LangGraph's long-term memory store on agentledger: ``LedgerStore`` (sync) and
``AsyncLedgerStore``.

Both are one implementation of LangGraph's ``BaseStore`` over ``ledger.memory``: a
batch is planned once (``_Plan``: namespaces checked by LangGraph's rules, puts to one
key folded to the last, the texts to embed gathered), embedded outside any
transaction, then run in one transaction, its reads before its puts (as LangGraph's
SQL stores run them, so a batch's reads see what was stored before it). A batch that
only reads runs in a read-only unit of work (a single read is one ledger call, retried
like any); one that writes runs in ``ledger.run``, retried whole after a serialization
failure. Items LangGraph reads with ``refresh_ttl`` have their time to live started
again (after a read-only batch, in a short write of its own).

    store = LedgerStore(ledger, index={"dims": 1536, "embed": embeddings})
    graph = builder.compile(checkpointer=LedgerSaver(ledger), store=store)

Semantics where LangGraph's own stores differ from each other: a filter's dotted key
is a nested field, numbers compare as numbers, a comparison across kinds (text with a
number) does not match; a plain put keeps the item's ``created_at``; search by meaning
scores each item by the best of its vectors (cosine), exactly, on every database, and
finds only items that have vectors; expired items are never read, whether or not
``ttl={"omit_expired": True}`` is given (agentledger has no reads of expired items).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)
from langgraph.store.base.batch import AsyncBatchedBaseStore
from sqlalchemy.engine import URL

from ... import PurgePolicy
from ..._awaited import Awaited, run_to_end
from ...errors import UsageError, ValidationError
from ...ledger import AsyncLedger, Ledger
from ...records import MemoryItem

logger = logging.getLogger("agentledger.integrations.langgraph")
T = TypeVar("T")
_SYNC_BATCH = "a sync store's batch"
_NAMESPACES_AT_ONCE = 10_000
Namespace = tuple[str, ...]
DEFAULT_SWEEP_MINUTES = 5.0
"""How often a sweeper started without an interval (nor ``sweep_interval_minutes``)
deletes expired items, as LangGraph's stores do."""
_EXPIRED = PurgePolicy(expired_memories=True)


# -- a batch, planned once --------------------------------------------------------------------


@dataclass
class _Index:
    """An ``IndexConfig`` made ready: its embeddings and its fields, tokenized once."""

    dims: int
    embeddings: Any
    fields: list[tuple[str, list[str] | str]]
    metric: str

    @classmethod
    def of(cls, config: IndexConfig | None) -> _Index | None:
        if config is None:
            return None
        if not isinstance(config, dict) or "embed" not in config:
            raise ValidationError(
                "index must be LangGraph's IndexConfig: {'dims': ..., 'embed': ..., "
                "'fields': [...]}",
                path="index",
            )
        # LangGraph's SQLite store calls the fields "text_fields"; take either name.
        settings: dict[str, Any] = dict(config)
        paths: list[str] = settings.get("fields") or settings.get("text_fields") or ["$"]
        return cls(
            dims=int(config.get("dims", 0)),
            embeddings=ensure_embeddings(config["embed"]),
            fields=[(path, _tokens(path)) for path in paths],
            # LangGraph's PostgreSQL store's distance_type (cosine unless told).
            metric=str(settings.get("distance_type", "cosine")),
        )


def _tokens(path: str) -> list[str] | str:
    """A field path tokenized once, as LangGraph's stores do (the root: ``"$"``)."""
    return tokenize_path(path) or "$" if path not in ("", "$") else "$"


@dataclass
class _Plan:
    """One batch: its ops by kind (each with its place in the answer), the puts folded
    to the last per key, and what must be embedded for them and for the searches."""

    size: int
    metric: str = "cosine"
    gets: list[tuple[int, GetOp]] = field(default_factory=list)
    searches: list[tuple[int, SearchOp]] = field(default_factory=list)
    listings: list[tuple[int, ListNamespacesOp]] = field(default_factory=list)
    puts: dict[tuple[Namespace, str], PutOp] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)
    """Texts to embed, in order: each put's fields, then each search's query."""
    owners: list[tuple[tuple[Namespace, str] | int, str]] = field(default_factory=list)
    """Whose each text is: a put's key and the field path, or a search's place."""

    @classmethod
    def of(cls, ops: Iterable[Op], index: _Index | None) -> _Plan:
        listed = list(ops)
        plan = cls(size=len(listed), metric="cosine" if index is None else index.metric)
        for op in listed:
            validate_op_namespace(op)  # every op, before any SQL
        for place, op in enumerate(listed):
            if isinstance(op, GetOp):
                plan.gets.append((place, op))
            elif isinstance(op, SearchOp):
                plan.searches.append((place, op))
            elif isinstance(op, ListNamespacesOp):
                plan.listings.append((place, op))
            elif isinstance(op, PutOp):
                plan.puts[(tuple(op.namespace), op.key)] = op  # the last put of a key wins
            else:
                raise ValidationError(
                    f"ops[{place}] is a {type(op).__name__}, not a GetOp, SearchOp, "
                    "ListNamespacesOp or PutOp",
                    path="ops",
                )
        if index is not None:
            plan._gather(index)
        return plan

    @property
    def writes(self) -> bool:
        return bool(self.puts)

    def _gather(self, index: _Index) -> None:
        for key, op in self.puts.items():
            if op.value is None or op.index is False:
                continue
            fields = index.fields if op.index is None else [(p, _tokens(p)) for p in op.index]
            for path, tokens in fields:
                found = get_text_at_path(op.value, tokens)
                for number, text in enumerate(found):
                    self.texts.append(text)
                    self.owners.append((key, path if len(found) == 1 else f"{path}.{number}"))
        for place, search in self.searches:
            if search.query:
                self.texts.append(search.query)
                self.owners.append((place, ""))

    def vectors(self, embedded: list[list[float]]) -> _Vectors:
        """The embedded texts given back to their puts and searches."""
        if len(embedded) != len(self.texts):
            raise ValidationError(
                f"the embeddings gave {len(embedded)} vectors for {len(self.texts)} texts",
                path="index",
            )
        vectors = _Vectors()
        for (owner, path), vector in zip(self.owners, embedded, strict=True):
            if isinstance(owner, int):
                vectors.queries[owner] = vector
            else:
                vectors.items.setdefault(owner, []).append((path, vector))
        return vectors

    async def run(self, memory: Any, vectors: _Vectors) -> tuple[list[Result], list[Any]]:
        """The batch on ``memory`` (a unit of work's memory repository, awaited): its
        reads, then its puts; the answers in the ops' order, and the items read that
        LangGraph asked to refresh."""
        results: list[Result] = [None] * self.size
        refresh: list[Any] = []
        for place, get in self.gets:
            stored = await memory.get(get.namespace, get.key)
            results[place] = None if stored is None else _item(stored)
            if stored is not None and get.refresh_ttl and stored.ttl_minutes is not None:
                refresh.append((stored.namespace, stored.key))
        for place, search in self.searches:
            found = await memory.search(
                search.namespace_prefix,
                filter=search.filter,
                query_vector=vectors.queries.get(place),
                metric=self.metric,
                limit=search.limit,
                offset=search.offset,
            )
            results[place] = [_search_item(stored) for stored in found]
            if search.refresh_ttl:
                refresh += [(s.namespace, s.key) for s in found if s.ttl_minutes is not None]
        for place, listing in self.listings:
            results[place] = await _list(memory, listing)
        if self.writes:
            if refresh:
                await memory.refresh(refresh)
                refresh = []
            for (namespace, key), put in self.puts.items():
                if put.value is None:
                    await memory.delete(namespace, key)
                else:
                    await memory.put(
                        namespace,
                        key,
                        dict(put.value),
                        ttl_minutes=put.ttl,
                        embeddings=vectors.items.get((namespace, key)),
                    )
        return results, refresh


@dataclass
class _Vectors:
    items: dict[tuple[Namespace, str], list[tuple[str, list[float]]]] = field(default_factory=dict)
    queries: dict[int, list[float]] = field(default_factory=dict)


async def _list(memory: Any, listing: ListNamespacesOp) -> list[Namespace]:
    """A ``list_namespaces`` op: one prefix and one suffix go to the database; more
    conditions (all of which must match) are applied to every namespace, then paged."""
    conditions = list(listing.match_conditions or ())
    prefixes = [tuple(c.path) for c in conditions if c.match_type == "prefix" and c.path]
    suffixes = [tuple(c.path) for c in conditions if c.match_type == "suffix" and c.path]
    if len(prefixes) <= 1 and len(suffixes) <= 1:
        found: list[Namespace] = await memory.list_namespaces(
            prefix=prefixes[0] if prefixes else None,
            suffix=suffixes[0] if suffixes else None,
            max_depth=listing.max_depth,
            limit=listing.limit,
            offset=listing.offset,
        )
        return found
    every: list[Namespace] = []
    while True:  # every namespace, a page at a time
        page = await memory.list_namespaces(limit=_NAMESPACES_AT_ONCE, offset=len(every))
        every += page
        if len(page) < _NAMESPACES_AT_ONCE:
            break
    kept = [
        namespace
        for namespace in every
        if all(_starts(namespace, p) for p in prefixes)
        and all(_starts(namespace[::-1], s[::-1]) for s in suffixes)
    ]
    if listing.max_depth is not None:
        kept = sorted({namespace[: listing.max_depth] for namespace in kept})
    return kept[listing.offset : listing.offset + listing.limit]


def _starts(namespace: Namespace, pattern: Namespace) -> bool:
    return len(namespace) >= len(pattern) and all(
        wanted in ("*", label) for label, wanted in zip(namespace, pattern, strict=False)
    )


def _item(stored: MemoryItem) -> Item:
    return Item(
        value=stored.value,
        key=stored.key,
        namespace=stored.namespace,
        created_at=stored.created_at,
        updated_at=stored.updated_at,
    )


def _search_item(stored: MemoryItem) -> SearchItem:
    return SearchItem(
        namespace=stored.namespace,
        key=stored.key,
        value=stored.value,
        created_at=stored.created_at,
        updated_at=stored.updated_at,
        score=stored.score,
    )


# -- the stores -------------------------------------------------------------------------------


class _Store(BaseStore):
    """What both stores share: their configuration and LangGraph's TTL flag."""

    supports_ttl = True

    def __init__(self, *, index: IndexConfig | None, ttl: TTLConfig | None) -> None:
        self.index_config = index
        """The ``IndexConfig`` given (None: no search by meaning)."""
        self.ttl_config = ttl
        self._index = _Index.of(index)
        self.embeddings = None if self._index is None else self._index.embeddings
        """The index's embeddings, as LangGraph's stores name them (None: no index)."""

    def _embedded(self, texts: list[str]) -> list[list[float]]:
        if not texts or self._index is None:
            return []
        return [list(vector) for vector in self._index.embeddings.embed_documents(texts)]

    async def _aembedded(self, texts: list[str]) -> list[list[float]]:
        if not texts or self._index is None:
            return []
        found = await self._index.embeddings.aembed_documents(texts)
        return [list(vector) for vector in found]

    def _interval(self, minutes: float | None) -> float:
        chosen = minutes or (self.ttl_config or {}).get("sweep_interval_minutes")
        return float(chosen or DEFAULT_SWEEP_MINUTES)


class LedgerStore(_Store):
    """LangGraph's ``BaseStore`` on a ``Ledger`` (sync API), which it borrows and never
    closes. Its async methods run the sync ones in a worker thread.

    Args:
        ledger: the ledger holding the memories (its ``memory`` repository).
        index: LangGraph's ``IndexConfig`` (``dims``, ``embed``, ``fields``) for search
            by meaning; None: search by filter only.
        ttl: LangGraph's ``TTLConfig`` (``default_ttl`` minutes, ``refresh_on_read``,
            ``sweep_interval_minutes``).
    """

    def __init__(
        self, ledger: Ledger, *, index: IndexConfig | None = None, ttl: TTLConfig | None = None
    ) -> None:
        if not isinstance(ledger, Ledger):
            raise UsageError(
                f"LedgerStore takes a Ledger, got {type(ledger).__name__}; "
                "an AsyncLedger goes to AsyncLedgerStore"
            )
        super().__init__(index=index, ttl=ttl)
        # LangGraph reads what it just wrote: its reads go to the primary, never a reader.
        self.ledger = ledger.primary
        """The ledger the memories are stored in."""
        self._sweeper: threading.Thread | None = None
        self._stop = threading.Event()

    @classmethod
    @contextmanager
    def from_url(cls, url: str | URL, **options: Any) -> Iterator[LedgerStore]:
        """A store on a ledger of its own at ``url``, closed on leaving the block (its
        schema must be at head: ``agentledger db upgrade``, or ``store.setup()``)."""
        with Ledger(url) as ledger:
            store = cls(ledger, **options)
            try:
                yield store
            finally:
                store.stop_ttl_sweeper()

    def setup(self) -> None:
        """Apply agentledger's migrations (the memory table among them)."""
        self.ledger.upgrade()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in one transaction, reads before puts; their answers in order."""
        plan = _Plan.of(ops, self._index)
        if plan.size == 0:
            return []
        vectors = plan.vectors(self._embedded(plan.texts))
        if plan.writes:
            results, _ = self.ledger.run(
                lambda uow: run_to_end(plan.run(Awaited(uow.memory), vectors), what=_SYNC_BATCH)
            )
            return results
        if plan.size == 1 and not plan.listings:  # one read: one retried ledger call
            results, refresh = run_to_end(
                plan.run(Awaited(self.ledger.memory), vectors), what=_SYNC_BATCH
            )
        else:
            with self.ledger.unit_of_work(readonly=True) as uow:
                results, refresh = run_to_end(
                    plan.run(Awaited(uow.memory), vectors), what=_SYNC_BATCH
                )
        if refresh:
            self.ledger.memory.refresh(refresh)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` in a worker thread."""
        return await asyncio.to_thread(self.batch, list(ops))

    def sweep_ttl(self) -> int:
        """Delete the items whose time to live ran out (retention's
        ``expired_memories`` rule); how many."""
        return self.ledger.retention.purge(_EXPIRED).memories

    def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        """Sweep every ``sweep_interval_minutes`` (else the TTL config's, else 5) in a
        daemon thread until ``stop_ttl_sweeper``; a future that stops it when
        cancelled. A second call while one runs returns for the same sweeper."""
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        done.add_done_callback(lambda future: self._stop.set() if future.cancelled() else None)
        if self._sweeper is not None and self._sweeper.is_alive():
            return done
        interval = self._interval(sweep_interval_minutes) * 60
        self._stop = stop = threading.Event()

        def sweep() -> None:
            while not stop.wait(interval):
                try:
                    self.sweep_ttl()
                except Exception:
                    logger.exception("agentledger: the memory store's TTL sweep failed")
            if not done.done():
                done.set_result(None)

        self._sweeper = threading.Thread(target=sweep, name="agentledger-ttl-sweeper", daemon=True)
        self._sweeper.start()
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; whether it has stopped (within ``timeout`` seconds)."""
        self._stop.set()
        sweeper = self._sweeper
        if sweeper is None:
            return True
        sweeper.join(timeout)
        if sweeper.is_alive():
            return False
        self._sweeper = None
        return True


class AsyncLedgerStore(_Store, AsyncBatchedBaseStore):
    """LangGraph's ``BaseStore`` on an ``AsyncLedger``, which it borrows and never
    closes; made inside a running event loop, as LangGraph's async stores are. Calls
    made at once are gathered into one batch (LangGraph's ``AsyncBatchedBaseStore``:
    60,000 concurrent ``aput`` calls are a handful of transactions). Its sync methods
    may be called from another thread than the event loop's: they run on that loop
    and wait (on the loop's own thread they raise ``asyncio.InvalidStateError``).

    Args:
        ledger: the ledger holding the memories (its ``memory`` repository).
        index: LangGraph's ``IndexConfig`` for search by meaning (None: by filter only).
        ttl: LangGraph's ``TTLConfig``.
    """

    def __new__(cls, ledger: AsyncLedger, **_: Any) -> AsyncLedgerStore:
        # Refused before the object exists: LangGraph's batched store's __del__ reads
        # what only its __init__ sets, and would fail on a half-made store.
        if not isinstance(ledger, AsyncLedger):
            raise UsageError(
                f"AsyncLedgerStore takes an AsyncLedger, got {type(ledger).__name__}; "
                "a Ledger goes to LedgerStore"
            )
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise UsageError(
                "make an AsyncLedgerStore inside a running event loop (in async code), "
                "as LangGraph's async stores are made; a LedgerStore needs none"
            ) from None
        return super().__new__(cls)

    def __init__(
        self,
        ledger: AsyncLedger,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
    ) -> None:
        _Store.__init__(self, index=index, ttl=ttl)
        AsyncBatchedBaseStore.__init__(self)
        self.ledger = ledger.primary
        """The ledger the memories are stored in."""
        self._sweeper: asyncio.Task[None] | None = None

    @classmethod
    @asynccontextmanager
    async def from_url(cls, url: str | URL, **options: Any) -> AsyncIterator[AsyncLedgerStore]:
        """A store on a ledger of its own at ``url``, closed on leaving the block (its
        schema must be at head: ``agentledger db upgrade``, or ``await store.setup()``)."""
        async with AsyncLedger(url) as ledger:
            store = cls(ledger, **options)
            try:
                yield store
            finally:
                await store.stop_ttl_sweeper()

    async def setup(self) -> None:
        """Apply agentledger's migrations (the memory table among them)."""
        await self.ledger.upgrade()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in one transaction, reads before puts; their answers in order."""
        plan = _Plan.of(ops, self._index)
        if plan.size == 0:
            return []
        vectors = plan.vectors(await self._aembedded(plan.texts))
        if plan.writes:
            results, _ = await self.ledger.run(lambda uow: plan.run(uow.memory, vectors))
            return results
        if plan.size == 1 and not plan.listings:
            results, refresh = await plan.run(self.ledger.memory, vectors)
        else:
            async with self.ledger.unit_of_work(readonly=True) as uow:
                results, refresh = await plan.run(uow.memory, vectors)
        if refresh:
            await self.ledger.memory.refresh(refresh)
        return results

    async def sweep_ttl(self) -> int:
        """Delete the items whose time to live ran out (retention's
        ``expired_memories`` rule); how many."""
        return (await self.ledger.retention.purge(_EXPIRED)).memories

    async def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> asyncio.Task[None]:
        """Sweep every ``sweep_interval_minutes`` (else the TTL config's, else 5) in a
        task until ``stop_ttl_sweeper``; the running task if one is."""
        if self._sweeper is not None and not self._sweeper.done():
            return self._sweeper
        interval = self._interval(sweep_interval_minutes) * 60

        async def sweep() -> None:
            while True:
                await asyncio.sleep(interval)
                try:
                    await self.sweep_ttl()
                except Exception:
                    logger.exception("agentledger: the memory store's TTL sweep failed")

        self._sweeper = asyncio.create_task(sweep(), name="agentledger-ttl-sweeper")
        return self._sweeper

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; whether it has stopped (within ``timeout`` seconds)."""
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is None or sweeper.done():
            return True
        sweeper.cancel()
        done, _ = await asyncio.wait({sweeper}, timeout=timeout)
        return bool(done)
