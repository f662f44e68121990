"""A saver made from a URL owns its ledger and closes it; one made from a ledger
borrows it and leaves it open."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.conformance.test_utils import (
    generate_checkpoint,
    generate_config,
    generate_metadata,
)

from agentledger import UsageError
from agentledger.integrations.langgraph import AsyncLedgerSaver, LedgerSaver

from .conftest import Saved, settled

CHECKPOINT = {"channel_values": {"a": 1}, "channel_versions": {"a": 1}}


async def test_a_saver_from_a_url_reads_what_a_borrowing_saver_wrote(saved: Saved) -> None:
    url = saved.reopen_url()
    stored = await saved.saver.aput(
        generate_config("t"), generate_checkpoint(**CHECKPOINT), generate_metadata(), {"a": 1}
    )

    if saved.mode == "async":
        async with AsyncLedgerSaver.from_url(url) as saver:
            await saver.setup()
            found = await saver.aget_tuple(stored)
        ledger = saver.ledger.sync_ledger
    else:
        with LedgerSaver.from_url(url) as sync_saver:
            sync_saver.setup()
            found = sync_saver.get_tuple(stored)
        ledger = sync_saver.ledger

    assert found is not None and found.checkpoint["channel_values"] == {"a": 1}
    with pytest.raises(UsageError, match="closed"):
        ledger.sessions.exists("t")
    assert await saved.saver.aget_tuple(stored) is not None  # the borrowed ledger is open


async def test_the_ledgers_langgraph_store_reads_the_threads_of_its_scope(saved: Saved) -> None:
    stored = await saved.saver.aput(
        generate_config("t"), generate_checkpoint(**CHECKPOINT), generate_metadata(), {"a": 1}
    )
    found = await settled(saved.ledger.langgraph().get("t", ""))
    elsewhere = await settled(saved.ledger.langgraph(app_name="another-app").get("t", ""))
    assert found is not None
    assert found.checkpoint_id == stored["configurable"]["checkpoint_id"]
    assert elsewhere is None
