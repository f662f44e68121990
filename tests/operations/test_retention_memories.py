"""Retention's fourth rule: long-term memory items past their time to live."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentledger import Ledger, ValidationError
from agentledger.retention import PurgeItem, PurgePolicy

from ..databases import dialect_params, migrated_database

ADA = ("memories", "ada")
EXPIRED = PurgePolicy(expired_memories=True)


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = datetime(2026, 5, 1, 12, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(params=dialect_params())
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> object:
    with migrated_database(request.param, tmp_path) as url:
        clock = Clock()
        with Ledger(url, clock=clock) as opened:
            for index in range(5):
                opened.memory.put(ADA, f"brief{index}", {"i": index}, ttl_minutes=1)
            opened.memory.put(ADA, "lasting", {"i": 9}, ttl_minutes=600)
            opened.memory.put(("other",), "forever", {})
            clock.now += timedelta(minutes=5)
            yield opened


def _keys(ledger: Ledger) -> set[str]:
    return {item.key for item in ledger.memory.search((), limit=100)}


def test_a_plan_lists_the_expired_items_and_changes_nothing(ledger: Ledger) -> None:
    seen: list[PurgeItem] = []
    report = ledger.retention.plan_purge(EXPIRED, batch=2, on_item=seen.append)
    assert report.memories == 5 and not report.applied
    assert [(item.kind, item.id, item.namespace, item.reason) for item in seen] == [
        ("memory", f"brief{index}", ADA, "expired") for index in range(5)
    ]
    assert ledger.memory.expired(limit=10) != []


def test_purge_deletes_the_expired_items_in_batches_and_keeps_the_rest(ledger: Ledger) -> None:
    seen: list[PurgeItem] = []
    report = ledger.retention.purge(EXPIRED, batch=2, on_item=seen.append)
    assert (report.memories, report.sessions, report.checkpoints) == (5, 0, 0)
    assert len(seen) == 5
    assert ledger.memory.expired() == []
    assert _keys(ledger) == {"lasting", "forever"}


def test_expired_memories_cannot_be_limited_to_a_user() -> None:
    with pytest.raises(ValidationError) as refused:
        PurgePolicy(expired_memories=True, user_id="ada")
    assert refused.value.path == "expired_memories"


def test_expired_memories_must_be_a_flag() -> None:
    with pytest.raises(ValidationError) as refused:
        PurgePolicy(expired_memories="yes")  # type: ignore[arg-type]
    assert refused.value.path == "expired_memories"
