"""The SDK's compaction hooks on LedgerSession (what ``OpenAIResponsesCompactionSession``
looks for): a whole-history replacement in one transaction, and a snapshot whose
suffix replacement happens only while the snapshot's items are still the newest, so a
concurrent writer's item survives a compaction."""

from __future__ import annotations

from typing import Any

from agentledger.integrations.openai_agents import LedgerSession

from .conftest import Store


def said(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def texts(items: list[Any]) -> list[str]:
    return [str(item["content"]) for item in items]


async def filled(store: Store, *words: str) -> LedgerSession:
    session = LedgerSession("chat", store.ledger)
    await session.add_items([said(word) for word in words])
    return session


async def test_an_atomic_replace_swaps_the_whole_history(store: Store) -> None:
    session = await filled(store, "a", "b", "c")
    assert await session._atomic_replace_items([said("summary")]) is True
    assert texts(await session.get_items()) == ["summary"]


async def test_an_atomic_replace_on_a_new_session_creates_it(store: Store) -> None:
    session = LedgerSession("fresh", store.ledger)
    assert await session._atomic_replace_items([said("summary")]) is True
    assert texts(await LedgerSession("fresh", store.ledger).get_items()) == ["summary"]


async def test_a_snapshot_holds_the_newest_items_and_says_whether_it_has_them_all(
    store: Store,
) -> None:
    session = await filled(store, "a", "b", "c", "d")
    partial = await session._get_compaction_snapshot(2)
    assert partial is not None and texts(partial.items) == ["c", "d"] and not partial.complete
    whole = await session._get_compaction_snapshot(4)
    assert whole is not None and texts(whole.items) == ["a", "b", "c", "d"] and whole.complete


async def test_a_snapshot_replaces_its_suffix_in_one_step(store: Store) -> None:
    session = await filled(store, "a", "b", "c", "d")
    snapshot = await session._get_compaction_snapshot(3)
    assert snapshot is not None
    assert await snapshot.replace_suffix(1, [said("c+d")]) is True
    assert texts(await session.get_items()) == ["a", "b", "c+d"]


async def test_a_concurrent_writer_s_item_survives_a_compaction(store: Store) -> None:
    session = await filled(store, "a", "b", "c")
    snapshot = await session._get_compaction_snapshot(3)
    assert snapshot is not None
    await LedgerSession("chat", store.ledger).add_items([said("late")])  # another writer
    assert await snapshot.replace_suffix(0, [said("summary")]) is False
    assert texts(await session.get_items()) == ["a", "b", "c", "late"]


async def test_a_snapshot_whose_items_were_removed_since_replaces_nothing(store: Store) -> None:
    session = await filled(store, "a", "b")
    snapshot = await session._get_compaction_snapshot(2)
    assert snapshot is not None
    await session.pop_item()
    assert await snapshot.replace_suffix(0, [said("summary")]) is False
    assert texts(await session.get_items()) == ["a"]


async def test_a_suffix_replaced_by_nothing_leaves_the_prefix(store: Store) -> None:
    session = await filled(store, "a", "b", "c")
    snapshot = await session._get_compaction_snapshot(2)
    assert snapshot is not None
    assert await snapshot.replace_suffix(0, []) is True
    assert texts(await session.get_items()) == ["a"]


async def test_prune_prefix_drops_the_oldest_items_it_accepts_in_the_same_step(
    store: Store,
) -> None:
    session = await filled(store, "old1", "old2", "keep", "old3", "x", "y")
    snapshot = await session._get_compaction_snapshot(
        2, prune_prefix=lambda item: str(item["content"]).startswith("old")
    )
    assert snapshot is not None
    assert await snapshot.replace_suffix(0, [said("x+y")]) is True
    assert texts(await session.get_items()) == ["keep", "old3", "x+y"]


async def test_the_snapshot_of_a_session_never_written_is_empty_and_replaces_nothing(
    store: Store,
) -> None:
    snapshot = await LedgerSession("none", store.ledger)._get_compaction_snapshot(5)
    assert snapshot is not None and snapshot.items == [] and snapshot.complete
    assert await snapshot.replace_suffix(0, [said("x")]) is False
