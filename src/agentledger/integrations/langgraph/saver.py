"""A LangGraph checkpointer on agentledger: ``LedgerSaver`` (sync) and ``AsyncLedgerSaver``.

Both are one implementation: LangGraph's values go through the saver's serializer
(``serde.dumps_typed``, never a pickle fallback) here, and the storage is
``agentledger.repositories.langgraph`` (written once, its async face generated). A
thread is an agentledger session whose external key is the thread id (in the scope
``app_name="langgraph"`` unless told otherwise), so ``agentledger sessions list``,
``delete``, purge, export, import and copy see LangGraph threads.

    saver = LedgerSaver(ledger)                  # or: with LedgerSaver.from_url(url) as saver
    graph = builder.compile(checkpointer=saver)

Concurrent writers: every checkpoint and write is its own row under its own key, so
two savers on one thread never overwrite each other's checkpoints (LangGraph's ids
are unique) and a regular write already stored is never replaced. A put from a stale
parent is not refused, since forking from an older checkpoint is what LangGraph's
time travel does; it is detectable, as every checkpoint keeps its parent id: two
children of one parent are a fork (``list`` shows both).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from sqlalchemy.engine import URL

from ...errors import UsageError, ValidationError
from ...langgraph_records import LANGGRAPH_APP_NAME, PruneStrategy, StoredCheckpoint
from ...ledger import AsyncLedger, Ledger

T = TypeVar("T")
logger = logging.getLogger("agentledger.integrations.langgraph")
DEFAULT_APP_NAME = LANGGRAPH_APP_NAME
"""The app_name of the threads' sessions unless a saver is given another."""


@contextmanager
def _logged_failure(method: str, config: RunnableConfig) -> Iterator[None]:
    """Log a failed save as an error, then raise it on. LangGraph swallows a save's
    error in some paths (a subgraph's checkpoint written on the way to an interrupt
    ends the run as if it had paused), so a save that fails is always in the log."""
    try:
        yield
    except Exception:
        configurable = config.get("configurable", {})
        logger.exception(
            "agentledger: LangGraph's %s of thread %r (namespace %r) failed; nothing of "
            "it is stored",
            method,
            configurable.get("thread_id"),
            configurable.get("checkpoint_ns", ""),
        )
        raise


def _as_json(value: dict[str, Any], what: str) -> Any:
    """``value`` as LangGraph's SQL savers store metadata: the JSON ``json.dumps`` makes
    of it, read back, so tuples come back lists and non-string keys strings (LangGraph
    itself writes tuples: ``counters_since_delta_snapshot``). What is not JSON even so
    (a set, bytes, a cycle) is refused; NaN and other values JSON has no room for are
    refused by the repository's check, with their path."""
    try:
        return json.loads(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValidationError(f"{what}: not JSON ({exc})", path=what) from None


class _Codec(BaseCheckpointSaver[str]):
    """What both savers share: LangGraph's shapes to the repository's and back."""

    def _put_arguments(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> dict[str, Any]:
        configurable = config["configurable"]
        rest: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = rest.pop("channel_values", {})
        inline = {channel: value for channel, value in values.items() if _is_small(value)}
        if inline:
            rest["channel_values"] = inline
        # What the row's own columns hold already is left out of the serialized form
        # (restored by ``_tuple``): the id, and the versions when they are text.
        if rest.get("id") == checkpoint["id"]:
            del rest["id"]
        versions = rest.get("channel_versions")
        if isinstance(versions, dict) and all(type(v) is str for v in versions.values()):
            del rest["channel_versions"]
        dumps = self.serde.dumps_typed
        return {
            "thread_id": configurable["thread_id"],
            "checkpoint_ns": configurable.get("checkpoint_ns", ""),
            "checkpoint_id": checkpoint["id"],
            "parent_checkpoint_id": configurable.get("checkpoint_id"),
            "checkpoint": dumps(rest),
            "channel_versions": {
                channel: str(version) for channel, version in checkpoint["channel_versions"].items()
            },
            "metadata": _as_json(dict(get_checkpoint_metadata(config, metadata)), "metadata"),
            "blobs": [
                (channel, str(version), dumps(values[channel]) if channel in values else None)
                for channel, version in new_versions.items()
                if channel not in inline
            ],
        }

    def _writes_arguments(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> dict[str, Any]:
        configurable = config["configurable"]
        return {
            "thread_id": configurable["thread_id"],
            "checkpoint_ns": configurable.get("checkpoint_ns", ""),
            "checkpoint_id": configurable["checkpoint_id"],
            "task_id": task_id,
            "writes": [
                (WRITES_IDX_MAP.get(channel, idx), channel, self.serde.dumps_typed(value))
                for idx, (channel, value) in enumerate(writes)
            ],
            "task_path": task_path,
        }

    @staticmethod
    def _get_arguments(config: RunnableConfig) -> tuple[str, str, str | None]:
        configurable = config["configurable"]
        return (
            configurable["thread_id"],
            configurable.get("checkpoint_ns", ""),
            get_checkpoint_id(config),
        )

    @staticmethod
    def _list_arguments(
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> dict[str, Any]:
        configurable = config["configurable"] if config else {}
        return {
            "thread_id": configurable.get("thread_id"),
            "checkpoint_ns": configurable.get("checkpoint_ns"),
            "checkpoint_id": configurable.get("checkpoint_id"),
            "before": get_checkpoint_id(before) if before else None,
            "filter": None if filter is None else _as_json(filter, "filter"),
            "limit": limit,
        }

    def _tuple(self, stored: StoredCheckpoint) -> CheckpointTuple:
        loads = self.serde.loads_typed
        checkpoint = loads(stored.checkpoint)
        checkpoint.setdefault("id", stored.checkpoint_id)
        checkpoint.setdefault("channel_versions", dict(stored.channel_versions))
        values = checkpoint.get("channel_values") or {}
        values.update((channel, loads(value)) for channel, value in stored.channel_values.items())
        checkpoint["channel_values"] = values
        place = {"thread_id": stored.thread_id, "checkpoint_ns": stored.checkpoint_ns}
        parent = stored.parent_checkpoint_id
        return CheckpointTuple(
            config={"configurable": {**place, "checkpoint_id": stored.checkpoint_id}},
            checkpoint=checkpoint,
            metadata=stored.metadata,  # type: ignore[arg-type]
            parent_config={"configurable": {**place, "checkpoint_id": parent}} if parent else None,
            pending_writes=[
                (task_id, channel, loads(value))
                for task_id, channel, value, _, _ in stored.pending_writes
            ],
        )

    @staticmethod
    def _stored_config(arguments: dict[str, Any]) -> RunnableConfig:
        return {
            "configurable": {
                "thread_id": arguments["thread_id"],
                "checkpoint_ns": arguments["checkpoint_ns"],
                "checkpoint_id": arguments["checkpoint_id"],
            }
        }

    def get_next_version(self, current: str | None, channel: None) -> str:
        """The version after ``current``: a zero-padded counter (so versions sort as
        text) and a random fraction, as LangGraph's own savers make them."""
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"


class LedgerSaver(_Codec):
    """A LangGraph checkpointer on a ``Ledger`` (sync API), which it borrows and never
    closes. Its async methods run the sync ones in a worker thread.

    Args:
        ledger: the ledger holding the threads.
        app_name: the app_name of the threads' sessions (their keys' scope).
        user_id: the user_id of the threads' sessions.
        serde: LangGraph's serializer (its default if None).
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        app_name: str | None = DEFAULT_APP_NAME,
        user_id: str | None = None,
        serde: SerializerProtocol | None = None,
    ) -> None:
        if not isinstance(ledger, Ledger):
            raise UsageError(
                f"LedgerSaver takes a Ledger, got {type(ledger).__name__}; "
                "an AsyncLedger goes to AsyncLedgerSaver"
            )
        super().__init__(serde=serde)
        self.ledger = ledger
        """The ledger the threads are stored in."""
        # LangGraph reads what it just wrote: its reads go to the primary, never a reader.
        self._threads = ledger.primary.langgraph(app_name=app_name, user_id=user_id)

    @classmethod
    @contextmanager
    def from_url(cls, url: str | URL, **options: Any) -> Iterator[LedgerSaver]:
        """A saver on a ledger of its own at ``url``, closed on leaving the block (its
        schema must be at head: ``agentledger db upgrade``, or ``saver.setup()``)."""
        with Ledger(url) as ledger:
            yield cls(ledger, **options)

    def setup(self) -> None:
        """Apply agentledger's migrations (the LangGraph tables among them)."""
        self.ledger.upgrade()

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its newest when it names no id), or None."""
        stored = self._threads.get(*self._get_arguments(config))
        return None if stored is None else self._tuple(stored)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """The checkpoints of a thread (every thread when ``config`` is None), newest
        first, filtered on metadata equality, before a checkpoint, at most ``limit``."""
        found = self._threads.list(**self._list_arguments(config, filter, before, limit))
        for stored in found:
            yield self._tuple(stored)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint with the channel values that changed; its config."""
        with _logged_failure("put", config):
            arguments = self._put_arguments(config, checkpoint, metadata, new_versions)
            self._threads.put(**arguments)
        return self._stored_config(arguments)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes on the checkpoint ``config`` names."""
        with _logged_failure("put_writes", config):
            arguments = self._writes_arguments(config, writes, task_id, task_path)
            self._threads.put_writes(**arguments)

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread (its session) with every namespace, checkpoint and write."""
        self._threads.delete_thread(thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints the runs ``run_ids`` wrote, with their writes."""
        self._threads.delete_for_runs(run_ids)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of one thread to another."""
        self._threads.copy_thread(source_thread_id, target_thread_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep only the newest checkpoint of each namespace (``keep_latest``), or none
        (``delete``), of the threads ``thread_ids``."""
        self._threads.prune(thread_ids, strategy=_strategy(strategy))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """``get_tuple`` in a worker thread."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """``list`` in a worker thread (read at once)."""
        found = await asyncio.to_thread(
            lambda: [*self.list(config, filter=filter, before=before, limit=limit)]
        )
        for item in found:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """``put`` in a worker thread."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """``put_writes`` in a worker thread."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """``delete_thread`` in a worker thread."""
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """``delete_for_runs`` in a worker thread."""
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """``copy_thread`` in a worker thread."""
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``prune`` in a worker thread."""
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)


class AsyncLedgerSaver(_Codec):
    """A LangGraph checkpointer on an ``AsyncLedger``, which it borrows and never closes.
    Its sync methods may be called from another thread than the event loop's (as
    LangGraph's async savers allow): they run on that loop and wait.

    Args:
        ledger: the ledger holding the threads.
        app_name: the app_name of the threads' sessions (their keys' scope).
        user_id: the user_id of the threads' sessions.
        serde: LangGraph's serializer (its default if None).
    """

    def __init__(
        self,
        ledger: AsyncLedger,
        *,
        app_name: str | None = DEFAULT_APP_NAME,
        user_id: str | None = None,
        serde: SerializerProtocol | None = None,
    ) -> None:
        if not isinstance(ledger, AsyncLedger):
            raise UsageError(
                f"AsyncLedgerSaver takes an AsyncLedger, got {type(ledger).__name__}; "
                "a Ledger goes to LedgerSaver"
            )
        super().__init__(serde=serde)
        self.ledger = ledger
        """The ledger the threads are stored in."""
        # LangGraph reads what it just wrote: its reads go to the primary, never a reader.
        self._threads = ledger.primary.langgraph(app_name=app_name, user_id=user_id)
        self._loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    @asynccontextmanager
    async def from_url(cls, url: str | URL, **options: Any) -> AsyncIterator[AsyncLedgerSaver]:
        """A saver on a ledger of its own at ``url``, closed on leaving the block (its
        schema must be at head: ``agentledger db upgrade``, or ``await saver.setup()``)."""
        async with AsyncLedger(url) as ledger:
            yield cls(ledger, **options)

    async def setup(self) -> None:
        """Apply agentledger's migrations (the LangGraph tables among them)."""
        await self.ledger.upgrade()

    def _seen(self) -> None:
        self._loop = asyncio.get_running_loop()

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its newest when it names no id), or None."""
        self._seen()
        stored = await self._threads.get(*self._get_arguments(config))
        return None if stored is None else self._tuple(stored)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """The checkpoints of a thread (every thread when ``config`` is None), newest
        first, filtered on metadata equality, before a checkpoint, at most ``limit``."""
        self._seen()
        arguments = self._list_arguments(config, filter, before, limit)
        async for stored in self._threads.list(**arguments):
            yield self._tuple(stored)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint with the channel values that changed; its config."""
        self._seen()
        with _logged_failure("aput", config):
            arguments = self._put_arguments(config, checkpoint, metadata, new_versions)
            await self._threads.put(**arguments)
        return self._stored_config(arguments)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes on the checkpoint ``config`` names."""
        self._seen()
        with _logged_failure("aput_writes", config):
            arguments = self._writes_arguments(config, writes, task_id, task_path)
            await self._threads.put_writes(**arguments)

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete the thread (its session) with every namespace, checkpoint and write."""
        self._seen()
        await self._threads.delete_thread(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints the runs ``run_ids`` wrote, with their writes."""
        self._seen()
        await self._threads.delete_for_runs(run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of one thread to another."""
        self._seen()
        await self._threads.copy_thread(source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep only the newest checkpoint of each namespace (``keep_latest``), or none
        (``delete``), of the threads ``thread_ids``."""
        self._seen()
        await self._threads.prune(thread_ids, strategy=_strategy(strategy))

    def _wait(self, call: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop:
            raise UsageError(
                "AsyncLedgerSaver's sync methods run on its event loop from another thread; "
                "await its async methods (aget_tuple, alist, aput...) instead"
            )
        return asyncio.run_coroutine_threadsafe(call(), loop).result()

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """``aget_tuple`` from another thread than the event loop's."""
        result: CheckpointTuple | None = self._wait(lambda: self.aget_tuple(config))
        return result

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """``alist`` from another thread than the event loop's (read at once)."""

        async def read() -> list[CheckpointTuple]:
            return [
                item async for item in self.alist(config, filter=filter, before=before, limit=limit)
            ]

        yield from self._wait(read)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """``aput`` from another thread than the event loop's."""
        result: RunnableConfig = self._wait(
            lambda: self.aput(config, checkpoint, metadata, new_versions)
        )
        return result

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """``aput_writes`` from another thread than the event loop's."""
        self._wait(lambda: self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """``adelete_thread`` from another thread than the event loop's."""
        self._wait(lambda: self.adelete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """``adelete_for_runs`` from another thread than the event loop's."""
        self._wait(lambda: self.adelete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """``acopy_thread`` from another thread than the event loop's."""
        self._wait(lambda: self.acopy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``aprune`` from another thread than the event loop's."""
        self._wait(lambda: self.aprune(thread_ids, strategy=strategy))


INLINE_TEXT = 64
"""The longest text channel value kept inside the serialized checkpoint."""


def _is_small(value: object) -> bool:
    """Whether a channel value is kept inside the checkpoint rather than in a row of
    its own: None, a bool, int or float, or a short text (a row of its own, with its
    key and index entry, takes more room than such a value; LangGraph's PostgresSaver
    keeps every primitive inline, which for a long text repeats it in every
    checkpoint)."""
    kind = type(value)
    if value is None or kind in (bool, int, float):
        return True
    return kind is str and len(value) <= INLINE_TEXT  # type: ignore[arg-type]


def _strategy(value: str) -> PruneStrategy:
    return value  # type: ignore[return-value]


__all__ = ["DEFAULT_APP_NAME", "AsyncLedgerSaver", "LedgerSaver"]
