"""Bad input to the savers gets a clear agentledger error naming what was wrong, and
nothing of it is stored."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langgraph.checkpoint.conformance.test_utils import (
    generate_checkpoint,
    generate_config,
    generate_metadata,
)

from agentledger import AsyncLedger, Ledger, Limits, UsageError, ValidationError
from agentledger.integrations.langgraph import AsyncLedgerSaver, LedgerSaver
from agentledger.testing import tier

from .conftest import Saved, make_saver, settled


async def _nothing_stored(saved: Saved, thread_id: str) -> None:
    found = await settled(saved.ledger.sessions.get_by_key_or_none(thread_id, app_name="langgraph"))
    assert found is None


async def _put(saver: Any, config: dict[str, Any], values: dict[str, Any] | None = None) -> Any:
    values = values or {"a": 1}
    versions = dict.fromkeys(values, 1)
    checkpoint = generate_checkpoint(channel_values=values, channel_versions=versions)
    return await saver.aput(config, checkpoint, generate_metadata(), versions)


@tier("logic")
async def test_a_thread_id_over_the_key_limit_is_refused(saved: Saved) -> None:
    with pytest.raises(ValidationError, match="thread_id must be 1 to 1,024 characters"):
        await _put(saved.saver, generate_config("t" * 1025))
    await _nothing_stored(saved, "t" * 1024)


@tier("logic")
async def test_a_namespace_over_its_limit_is_refused(saved: Saved) -> None:
    with pytest.raises(ValidationError, match="checkpoint_ns must be 0 to 255 characters"):
        await _put(saved.saver, generate_config("t", checkpoint_ns="n" * 256))
    await _nothing_stored(saved, "t")


@tier("logic")
async def test_metadata_that_is_not_json_is_refused(saved: Saved) -> None:
    checkpoint = generate_checkpoint()
    with pytest.raises(ValidationError, match="metadata"):
        await saved.saver.aput(
            generate_config("t"), checkpoint, generate_metadata(tags={"a", "b"}), {}
        )
    await _nothing_stored(saved, "t")


@tier("logic")
async def test_a_failed_put_is_logged_as_an_error_naming_the_thread(
    saved: Saved, caplog: pytest.LogCaptureFixture
) -> None:
    metadata = generate_metadata(tags={"a", "b"})
    with caplog.at_level(logging.ERROR, "agentledger"), pytest.raises(ValidationError):
        await saved.saver.aput(generate_config("lost"), generate_checkpoint(), metadata, {})

    [record] = caplog.records
    assert record.levelno == logging.ERROR
    assert "put of thread 'lost'" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[0] is ValidationError


@tier("logic")
async def test_a_failed_put_writes_is_logged_as_an_error(
    saved: Saved, caplog: pytest.LogCaptureFixture
) -> None:
    config = generate_config("lost", checkpoint_id="1")
    with caplog.at_level(logging.ERROR, "agentledger"), pytest.raises(ValidationError):
        await saved.saver.aput_writes(config, [("c", 1)], "t" * 10_000)

    [record] = caplog.records
    assert "put_writes of thread 'lost'" in record.getMessage()


@tier("logic")
async def test_a_metadata_filter_that_is_not_json_is_refused(saved: Saved) -> None:
    await _put(saved.saver, generate_config("t"))
    with pytest.raises(ValidationError, match="filter"):
        async for _ in saved.saver.alist(generate_config("t"), filter={"step": {1, 2}}):
            pass


@pytest.fixture
async def limited(saved: Saved) -> AsyncIterator[Any]:
    """A saver of the same mode on the same engine whose checkpoints are at most 4 KiB."""
    await settled(saved.ledger.sessions.exists("warm-up"))  # an in-memory store migrates now
    limits = Limits(max_checkpoint_bytes=4096)
    if saved.mode == "async":
        ledger: Any = AsyncLedger(engine=saved.ledger.engine, limits=limits)
    else:
        ledger = Ledger(engine=saved.ledger.engine, limits=limits)
    yield make_saver(saved.mode, ledger)
    await settled(ledger.close())


@tier("logic")
async def test_a_checkpoint_larger_than_the_limit_is_refused(saved: Saved, limited: Any) -> None:
    with pytest.raises(ValidationError, match="over the limit of 4,096"):
        await _put(limited, generate_config("t"), {"a": 1, "big": b"x" * 5000})
    await _nothing_stored(saved, "t")


@tier("logic")
async def test_writes_larger_than_the_limit_are_refused_and_none_is_stored(
    saved: Saved, limited: Any
) -> None:
    stored = await _put(limited, generate_config("t"))
    with pytest.raises(ValidationError, match="writes is"):
        await limited.aput_writes(stored, [("a", 1), ("b", b"x" * 5000)], "task")
    found = await limited.aget_tuple(stored)
    assert found is not None and found.pending_writes == []


@tier("logic")
async def test_a_serializer_type_ending_in_agentledger_s_compressed_mark_is_refused(
    saved: Saved,
) -> None:
    class Marked:
        def dumps_typed(self, value: Any) -> tuple[str, bytes]:
            return "msgpack+zlib", b"\x01"

        def loads_typed(self, value: tuple[str, bytes]) -> Any:
            return 1

    saved.saver.serde = Marked()  # type: ignore[assignment]
    with pytest.raises(ValidationError, match="ends in '\\+zlib'"):
        await _put(saved.saver, generate_config("marked"), {"a": "x" * 100})
    await _nothing_stored(saved, "marked")


@tier("logic")
async def test_an_unknown_prune_strategy_is_refused(saved: Saved) -> None:
    stored = await _put(saved.saver, generate_config("t"))
    with pytest.raises(ValidationError, match="strategy must be 'keep_latest' or 'delete'"):
        await saved.saver.aprune(["t"], strategy="oldest")
    assert await saved.saver.aget_tuple(stored) is not None


async def test_each_saver_refuses_the_other_kind_of_ledger() -> None:
    async with AsyncLedger.in_memory() as async_ledger:
        with pytest.raises(UsageError, match="goes to AsyncLedgerSaver"):
            LedgerSaver(async_ledger)  # type: ignore[arg-type]
    with Ledger.in_memory() as ledger, pytest.raises(UsageError, match="goes to LedgerSaver"):
        AsyncLedgerSaver(ledger)  # type: ignore[arg-type]


async def test_the_async_savers_sync_methods_refuse_the_event_loops_thread() -> None:
    async with AsyncLedger.in_memory() as ledger:
        saver = AsyncLedgerSaver(ledger)
        await _put(saver, generate_config("t"))
        with pytest.raises(UsageError, match="from another thread"):
            saver.get_tuple(generate_config("t"))
