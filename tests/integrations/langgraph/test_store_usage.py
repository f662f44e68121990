"""How LangGraph's stores on agentledger refuse what cannot work, and the batch paths
LangGraph's own store tests do not reach (logic only: one in-memory ledger each)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from langgraph.store.base import IndexConfig, ListNamespacesOp, MatchCondition, PutOp
from langgraph.store.base.embed import ensure_embeddings

from agentledger import AsyncLedger, Ledger, UsageError, ValidationError
from agentledger.integrations.langgraph import AsyncLedgerStore, LedgerStore
from agentledger.integrations.langgraph import store as store_module


@pytest.fixture
def ledger() -> Iterator[Ledger]:
    with Ledger.in_memory() as opened:
        yield opened


def test_a_sync_store_refuses_an_async_ledger() -> None:
    with pytest.raises(UsageError, match="an AsyncLedger goes to AsyncLedgerStore"):
        LedgerStore(AsyncLedger.in_memory())  # type: ignore[arg-type]


async def test_an_async_store_refuses_a_sync_ledger(ledger: Ledger) -> None:
    with pytest.raises(UsageError, match="a Ledger goes to LedgerStore"):
        AsyncLedgerStore(ledger)  # type: ignore[arg-type]


def test_an_async_store_made_outside_an_event_loop_is_refused() -> None:
    with pytest.raises(UsageError, match="inside a running event loop"):
        AsyncLedgerStore(AsyncLedger.in_memory())


def test_embeddings_that_give_the_wrong_number_of_vectors_write_nothing(
    ledger: Ledger,
) -> None:
    def one_vector_whatever_the_texts(texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0]]

    index = IndexConfig(dims=2, embed=ensure_embeddings(one_vector_whatever_the_texts))
    store = LedgerStore(ledger, index=index)

    with pytest.raises(ValidationError, match="gave 1 vectors for 2 texts"):
        store.batch(
            [
                PutOp(("docs",), "a", {"text": "first"}),
                PutOp(("docs",), "b", {"text": "second"}),
            ]
        )
    assert store.search(("docs",)) == []


def test_namespaces_matching_several_prefixes_are_those_matching_all_of_them(
    ledger: Ledger,
) -> None:
    store = LedgerStore(ledger)
    for namespace in [("a", "x", "c"), ("a", "y", "c"), ("a", "x", "d"), ("b", "x", "c")]:
        store.put(namespace, "k", {"v": 1})
    listing = ListNamespacesOp(
        match_conditions=(
            MatchCondition("prefix", ("a",)),
            MatchCondition("prefix", ("*", "x")),
            MatchCondition("suffix", ("c",)),
        ),
        limit=10,
    )

    assert store.batch([listing]) == [[("a", "x", "c")]]


def test_namespaces_matching_several_suffixes_are_cut_to_the_depth_asked_and_paged(
    ledger: Ledger,
) -> None:
    store = LedgerStore(ledger)
    for namespace in [("a", "x", "c"), ("a", "y", "c"), ("b", "y", "c"), ("a", "x", "d")]:
        store.put(namespace, "k", {"v": 1})
    listing = ListNamespacesOp(
        match_conditions=(MatchCondition("suffix", ("c",)), MatchCondition("suffix", ("*", "c"))),
        max_depth=1,
        limit=1,
        offset=1,
    )

    assert store.batch([listing]) == [[("b",)]]


def test_namespaces_matching_several_conditions_are_found_past_the_first_page_read(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Several prefixes are matched in Python over every namespace, read a page at a time.
    monkeypatch.setattr(store_module, "_NAMESPACES_AT_ONCE", 2)
    store = LedgerStore(ledger)
    wanted = [("a", "x", str(index)) for index in range(5)]
    for namespace in [*wanted, ("a", "y", "0"), ("b", "x", "0")]:
        store.put(namespace, "k", {"v": 1})
    listing = ListNamespacesOp(
        match_conditions=(MatchCondition("prefix", ("a",)), MatchCondition("prefix", ("*", "x"))),
        limit=10,
    )

    assert store.batch([listing]) == [wanted]


def test_a_sync_store_runs_in_a_worker_thread_for_async_callers(ledger: Ledger) -> None:
    store = LedgerStore(ledger)

    async def main() -> object:
        await store.aput(("users", "ada"), "food", {"likes": "pasta"})
        found = await store.aget(("users", "ada"), "food")
        return None if found is None else found.value

    assert asyncio.run(main()) == {"likes": "pasta"}
