"""Contract: long-term memory, items under namespaces kept across sessions."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from agentledger import ConflictError, ValidationError

from .checkpoints import SettableClock, ledger_with
from .harness import Harness, tier

ADA = ("memories", "ada")
MINUTE = timedelta(minutes=1)


class MemoryContract:
    """Storing, reading, searching and deleting memory items."""

    async def test_a_put_item_reads_back_at_revision_1(self, harness: Harness) -> None:
        value = {"food": "pizza", "n": [1, 2.5, None], "deep": {"ok": True}}
        stored = await harness.ledger.memory.put(ADA, "prefs", value)
        read = await harness.ledger.memory.get(ADA, "prefs")
        assert read == stored
        assert (read.namespace, read.key, read.value, read.revision) == (ADA, "prefs", value, 1)
        assert read.created_at == read.updated_at
        assert (read.ttl_minutes, read.expires_at, read.score) == (None, None, None)

    async def test_an_item_never_stored_reads_as_none(self, harness: Harness) -> None:
        assert await harness.ledger.memory.get(ADA, "nothing") is None

    async def test_a_plain_put_overwrites_and_bumps_the_revision(self, harness: Harness) -> None:
        memory = harness.ledger.memory
        first = await memory.put(ADA, "prefs", {"food": "pizza"})
        second = await memory.put(ADA, "prefs", {"food": "soup"})
        assert (second.revision, second.created_at) == (2, first.created_at)
        assert (await memory.get(ADA, "prefs")).value == {"food": "soup"}

    async def test_delete_removes_the_item_and_says_whether_there_was_one(
        self, harness: Harness
    ) -> None:
        memory = harness.ledger.memory
        await memory.put(ADA, "prefs", {"a": 1})
        assert await memory.delete(ADA, "prefs") is True
        assert await memory.delete(ADA, "prefs") is False
        assert await memory.get(ADA, "prefs") is None

    async def test_labels_differing_only_by_spaces_or_control_characters_are_told_apart(
        self, harness: Harness
    ) -> None:
        memory = harness.ledger.memory
        labels = ["ada", "ada ", "ada  ", "ada\n", "ada\t", " ada", "a da"]
        for number, label in enumerate(labels):
            await memory.put(("notes", label), "k", {"v": number})
        for number, label in enumerate(labels):
            assert [item.value for item in await memory.search(("notes", label))] == [{"v": number}]
        listed = await memory.list_namespaces(prefix=("notes",))
        assert sorted(listed) == sorted(("notes", label) for label in labels)
        await memory.put(("notes", "ada", "\tdeeper"), "k", {"v": "under"})
        found = await memory.search(("notes", "ada"))
        assert sorted(str(item.value["v"]) for item in found) == ["0", "under"]

    async def test_keys_differing_only_inside_are_told_apart(self, harness: Harness) -> None:
        memory = harness.ledger.memory
        await memory.put(ADA, "k", {"v": 1})
        await memory.put(ADA, " k", {"v": 2})
        await memory.put(ADA, "k k", {"v": 3})
        assert [(await memory.get(ADA, key)).value["v"] for key in ("k", " k", "k k")] == [1, 2, 3]

    async def test_a_filter_on_text_matches_it_exactly_in_case_and_kind(
        self, harness: Harness
    ) -> None:
        memory = harness.ledger.memory
        values = {"lower": "food", "upper": "Food", "number": 1, "spaced": "food "}
        for key, kind in values.items():
            await memory.put(ADA, key, {"kind": kind, "n": 1.0 if key == "upper" else 2})
        found = await memory.search(ADA, filter={"kind": "food"})
        assert [item.key for item in found] == ["lower"]
        found = await memory.search(ADA, filter={"kind": {"$eq": "Food"}, "n": 1})
        assert [item.key for item in found] == ["upper"]

    async def test_delete_all_deletes_a_namespace_and_those_under_it(
        self, harness: Harness
    ) -> None:
        memory = harness.ledger.memory
        await memory.put(ADA, "a", {"session": "s1"})
        await memory.put(ADA, "b", {"session": "s2"})
        await memory.put((*ADA, "trips"), "c", {"session": "s1"})
        await memory.put(("memories", "adam"), "d", {"session": "s1"})
        assert await memory.delete_all(ADA, filter={"session": "s1"}) == 2
        assert [item.key for item in await memory.search(())] == ["d", "b"]
        assert await memory.delete_all(ADA) == 1
        assert [item.key for item in await memory.search(())] == ["d"]

    async def test_a_compare_and_set_put_replaces_only_the_revision_it_read(
        self, harness: Harness
    ) -> None:
        memory = harness.ledger.memory
        read = await memory.put(ADA, "count", {"n": 1})
        await memory.put(ADA, "count", {"n": 2}, expected_revision=read.revision)
        with pytest.raises(ConflictError) as raised:
            await memory.put(ADA, "count", {"n": 99}, expected_revision=read.revision)
        assert (raised.value.reason, raised.value.expected, raised.value.actual) == ("stale", 1, 2)
        stored = await memory.get(ADA, "count")
        assert (stored.value, stored.revision) == ({"n": 2}, 2)

    async def test_a_compare_and_set_of_an_item_not_stored_is_stale(self, harness: Harness) -> None:
        with pytest.raises(ConflictError) as raised:
            await harness.ledger.memory.put(ADA, "ghost", {"n": 1}, expected_revision=3)
        assert (raised.value.reason, raised.value.actual) == ("stale", None)
        assert await harness.ledger.memory.get(ADA, "ghost") is None

    async def test_expected_revision_0_creates_only(self, harness: Harness) -> None:
        memory = harness.ledger.memory
        created = await memory.put(ADA, "once", {"by": "first"}, expected_revision=0)
        with pytest.raises(ConflictError) as raised:
            await memory.put(ADA, "once", {"by": "second"}, expected_revision=0)
        assert raised.value.reason == "exists"
        assert await memory.get(ADA, "once") == created

    async def test_a_delete_at_a_stale_revision_is_refused(self, harness: Harness) -> None:
        memory = harness.ledger.memory
        await memory.put(ADA, "k", {"v": 1})
        await memory.put(ADA, "k", {"v": 2})
        with pytest.raises(ConflictError) as raised:
            await memory.delete(ADA, "k", expected_revision=1)
        assert raised.value.reason == "stale"
        assert await memory.delete(ADA, "k", expected_revision=2) is True

    async def test_labels_holding_dots_and_percents_are_namespaces_of_their_own(
        self, harness: Harness
    ) -> None:
        memory = harness.ledger.memory
        await memory.put(("a.b",), "k", {"where": "a.b"})
        await memory.put(("a", "b"), "k", {"where": "a/b"})
        await memory.put(("a%2Eb",), "k", {"where": "a%2Eb"})
        assert (await memory.get(("a.b",), "k")).value == {"where": "a.b"}
        assert (await memory.get(("a%2Eb",), "k")).value == {"where": "a%2Eb"}
        under_a = await memory.search(("a",))
        assert [item.namespace for item in under_a] == [("a", "b")]
        assert await memory.list_namespaces() == [("a", "b"), ("a%2Eb",), ("a.b",)]

    async def test_search_reads_a_namespace_and_those_under_it_newest_write_first(
        self, harness: Harness
    ) -> None:
        memory = harness.ledger.memory
        await memory.put(("docs",), "1", {"n": 1})
        await memory.put(("docs", "drafts"), "2", {"n": 2})
        await memory.put(("docsets",), "3", {"n": 3})  # a sibling sharing the text prefix
        await memory.put(("docs",), "1", {"n": 4})  # rewritten: now the newest
        found = await memory.search(("docs",))
        assert [(item.key, item.value["n"]) for item in found] == [("1", 4), ("2", 2)]
        assert len(await memory.search(())) == 3

    async def test_search_pages_with_limit_and_offset(self, harness: Harness) -> None:
        memory = harness.ledger.memory
        for index in range(5):
            await memory.put(("pages",), f"k{index}", {"i": index})
        everything = [item.key for item in await memory.search(("pages",), limit=10)]
        page = await memory.search(("pages",), limit=2, offset=1)
        assert [item.key for item in page] == everything[1:3]

    @pytest.mark.parametrize(
        ("condition", "keys"),
        [
            ({"kind": "fruit"}, ["apple", "pear"]),
            ({"kind": {"$eq": "fruit"}}, ["apple", "pear"]),
            ({"kind": {"$ne": "fruit"}}, ["kale"]),
            ({"price": {"$gt": 2}}, ["pear"]),
            ({"price": {"$gte": 2}}, ["kale", "pear"]),
            ({"price": {"$lt": 2}}, ["apple"]),
            ({"price": {"$lte": 2, "$gt": 1}}, ["kale"]),
            ({"origin.country": "pt"}, ["pear"]),
            ({"kind": "fruit", "price": {"$lt": 3}}, ["apple"]),
            ({"colour": "green"}, []),
        ],
        ids=["plain", "eq", "ne", "gt", "gte", "lt", "range", "nested", "and", "missing"],
    )
    async def test_search_filters_on_the_values_fields(
        self, harness: Harness, condition: dict[str, Any], keys: list[str]
    ) -> None:
        memory = harness.ledger.memory
        await memory.put(("food",), "apple", {"kind": "fruit", "price": 1})
        await memory.put(("food",), "kale", {"kind": "leaf", "price": 2})
        await memory.put(
            ("food",), "pear", {"kind": "fruit", "price": 3, "origin": {"country": "pt"}}
        )
        found = await memory.search(("food",), filter=condition)
        assert sorted(item.key for item in found) == keys

    async def test_a_filtered_search_pages_over_the_matches(self, harness: Harness) -> None:
        memory = harness.ledger.memory
        for index in range(6):
            await memory.put(("n",), f"k{index}", {"even": index % 2 == 0})
        evens = [item.key for item in await memory.search(("n",), filter={"even": True})]
        page = await memory.search(("n",), filter={"even": True}, limit=1, offset=1)
        assert len(evens) == 3
        assert [item.key for item in page] == evens[1:2]

    async def test_search_by_meaning_orders_by_cosine_similarity(self, harness: Harness) -> None:
        memory = harness.ledger.memory
        await memory.put(("v",), "east", {"t": "e"}, embeddings=[("t", [1.0, 0.0])])
        await memory.put(("v",), "north", {"t": "n"}, embeddings=[("t", [0.0, 1.0])])
        await memory.put(
            ("v",), "both", {"t": "b"}, embeddings=[("a", [0.0, 1.0]), ("b", [0.6, 0.8])]
        )
        await memory.put(("v",), "plain", {"t": "p"})
        found = await memory.search(("v",), query_vector=[0.0, 2.0])
        assert [item.key for item in found][2:] == ["east"]  # "plain" has no vector
        assert {item.key for item in found[:2]} == {"both", "north"}
        assert [item.score for item in found] == [pytest.approx(1.0), pytest.approx(1.0), 0.0]
        only = await memory.search(("v",), query_vector=[1.0, 0.0], filter={"t": "e"})
        assert [item.key for item in only] == ["east"]

    async def test_search_by_meaning_scores_by_dot_product_or_distance_when_asked(
        self, harness: Harness
    ) -> None:
        memory = harness.ledger.memory
        await memory.put(("v",), "near", {}, embeddings=[("t", [1.0, 1.0])])
        await memory.put(("v",), "long", {}, embeddings=[("t", [3.0, 0.0])])
        dot = await memory.search(("v",), query_vector=[1.0, 0.0], metric="inner_product")
        l2 = await memory.search(("v",), query_vector=[1.0, 0.0], metric="l2")
        assert [(item.key, item.score) for item in dot] == [("long", 3.0), ("near", 1.0)]
        assert [(item.key, item.score) for item in l2] == [("near", -1.0), ("long", -2.0)]

    async def test_search_by_meaning_meets_the_filter_then_pages(self, harness: Harness) -> None:
        memory = harness.ledger.memory
        for index in range(6):
            vector = [1.0, index / 10]
            await memory.put(
                ("v",), f"k{index}", {"even": index % 2 == 0}, embeddings=[("t", vector)]
            )
        found = await memory.search(("v",), query_vector=[1.0, 0.0], filter={"even": True})
        page = await memory.search(
            ("v",), query_vector=[1.0, 0.0], filter={"even": True}, limit=1, offset=1
        )
        assert [item.key for item in found] == ["k0", "k2", "k4"]
        assert [(item.key, item.score) for item in page] == [("k2", found[1].score)]
        assert page[0].value == {"even": True} and page[0].revision == 1

    async def test_search_by_meaning_passes_over_vectors_of_another_length(
        self, harness: Harness
    ) -> None:
        memory = harness.ledger.memory
        await memory.put(("v",), "two", {}, embeddings=[("t", [1.0, 0.0])])
        await memory.put(("v",), "three", {}, embeddings=[("t", [1.0, 0.0, 0.0])])
        found = await memory.search(("v",), query_vector=[1.0, 0.0, 0.0])
        assert [item.key for item in found] == ["three"]

    async def test_list_namespaces_matches_prefix_suffix_and_depth(self, harness: Harness) -> None:
        memory = harness.ledger.memory
        for namespace in [("a", "b", "c"), ("a", "b", "d"), ("a", "x", "c"), ("z",)]:
            await memory.put(namespace, "k", {})
        listed = memory.list_namespaces
        assert await listed() == [("a", "b", "c"), ("a", "b", "d"), ("a", "x", "c"), ("z",)]
        assert await listed(prefix=("a", "b")) == [("a", "b", "c"), ("a", "b", "d")]
        assert await listed(prefix=("a", "*", "c")) == [("a", "b", "c"), ("a", "x", "c")]
        assert await listed(suffix=("c",)) == [("a", "b", "c"), ("a", "x", "c")]
        assert await listed(max_depth=2) == [("a", "b"), ("a", "x"), ("z",)]
        assert await listed(limit=2, offset=1) == [("a", "b", "d"), ("a", "x", "c")]

    async def test_memories_outlive_the_sessions_of_their_user(self, harness: Harness) -> None:
        ledger = harness.ledger
        await ledger.sessions.create("s", app_name="app", user_id="ada")
        await ledger.memory.put(ADA, "k", {"v": 1})
        await ledger.sessions.delete("s")
        assert (await ledger.memory.get(ADA, "k")).value == {"v": 1}

    async def test_puts_in_a_unit_of_work_commit_with_it(self, harness: Harness) -> None:
        with pytest.raises(RuntimeError):
            async with harness.ledger.unit_of_work() as uow:
                await uow.memory.put(ADA, "lost", {"v": 1})
                raise RuntimeError("boom")
        assert await harness.ledger.memory.get(ADA, "lost") is None
        async with harness.ledger.unit_of_work() as uow:
            stored = await uow.memory.put(ADA, "kept", {"v": 1})
            assert await uow.memory.get(ADA, "kept") == stored
        assert await harness.ledger.memory.get(ADA, "kept") == stored

    @pytest.mark.parametrize(
        ("namespace", "key", "value", "path"),
        [
            ((), "k", {}, "namespace"),
            (("",), "k", {}, "namespace"),
            (("a", 1), "k", {}, "namespace"),
            ("memories", "k", {}, "namespace"),
            (("nul\x00",), "k", {}, "namespace"),
            (("x" * 513,), "k", {}, "namespace"),
            (ADA, "", {}, "key"),
            (ADA, "k ", {}, "key"),
            (ADA, "line\n", {}, "key"),
            (ADA, "k" * 256, {}, "key"),
            (ADA, 7, {}, "key"),
            (ADA, "k", ["not", "an", "object"], "value"),
            (ADA, "k", {"x": float("nan")}, "value['x']"),
            (ADA, "k", {"x": {1, 2}}, "value['x']"),
        ],
        ids=[
            "no-labels",
            "empty-label",
            "int-label",
            "a-string",
            "nul-label",
            "too-long",
            "empty-key",
            "key-ending-in-a-space",
            "key-with-a-newline",
            "long-key",
            "int-key",
            "list-value",
            "nan",
            "set",
        ],
    )
    @tier("logic")
    async def test_a_bad_namespace_key_or_value_is_refused_naming_it(
        self, harness: Harness, namespace: Any, key: Any, value: Any, path: str
    ) -> None:
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.memory.put(namespace, key, value)
        assert raised.value.path == path
        assert await harness.ledger.memory.list_namespaces() == []

    @pytest.mark.parametrize(
        ("options", "path"),
        [
            ({"ttl_minutes": 0}, "ttl_minutes"),
            ({"ttl_minutes": -1}, "ttl_minutes"),
            ({"ttl_minutes": float("inf")}, "ttl_minutes"),
            ({"ttl_minutes": "5"}, "ttl_minutes"),
            ({"embeddings": [("t", [1.0]), ("u", [1.0, 2.0])]}, "embeddings"),
            ({"embeddings": [("t", [float("nan")])]}, "embeddings"),
            ({"embeddings": [("t", [])]}, "embeddings"),
            ({"embeddings": [("t",)]}, "embeddings"),
            ({"text": "nul\x00"}, "text"),
            ({"expected_revision": -1}, "expected_revision"),
        ],
        ids=[
            "ttl-0",
            "ttl-negative",
            "ttl-inf",
            "ttl-text",
            "ragged",
            "nan-vector",
            "empty-vector",
            "no-vector",
            "nul-text",
            "negative-revision",
        ],
    )
    @tier("logic")
    async def test_a_bad_option_of_put_is_refused_naming_it(
        self, harness: Harness, options: dict[str, Any], path: str
    ) -> None:
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.memory.put(ADA, "k", {"v": 1}, **options)
        assert raised.value.path == path
        assert await harness.ledger.memory.get(ADA, "k") is None

    @pytest.mark.parametrize(
        ("options", "path"),
        [
            ({"filter": {"n": {"$in": [1]}}}, "filter"),
            ({"filter": ["n"]}, "filter"),
            ({"limit": -1}, "limit"),
            ({"offset": "2"}, "offset"),
            ({"query_vector": []}, "query_vector"),
            ({"query_vector": ["a"]}, "query_vector"),
            ({"query_vector": [1.0], "metric": "hamming"}, "metric"),
        ],
        ids=[
            "unknown-operator",
            "list-filter",
            "negative-limit",
            "text-offset",
            "empty",
            "words",
            "metric",
        ],
    )
    @tier("logic")
    async def test_a_bad_search_is_refused_naming_what(
        self, harness: Harness, options: dict[str, Any], path: str
    ) -> None:
        with pytest.raises(ValidationError) as raised:
            await harness.ledger.memory.search(ADA, **options)
        assert raised.value.path == path


class MemoryExpiryContract:
    """Times to live, with a clock the test moves."""

    async def test_ttl_sets_expires_at_from_the_clock(self, harness: Harness) -> None:
        clock = SettableClock()
        async with ledger_with(harness, clock=clock) as ledger:
            stored = await ledger.memory.put(ADA, "k", {"v": 1}, ttl_minutes=1.5)
        assert (stored.ttl_minutes, stored.expires_at) == (1.5, clock.now + 1.5 * MINUTE)

    async def test_an_expired_item_is_never_read(self, harness: Harness) -> None:
        clock = SettableClock()
        async with ledger_with(harness, clock=clock) as ledger:
            await ledger.memory.put(ADA, "brief", {"v": 1}, ttl_minutes=1)
            await ledger.memory.put(ADA, "lasting", {"v": 2})
            await ledger.memory.put(("brief",), "only", {"v": 3}, ttl_minutes=1)
            clock.advance(MINUTE)
            assert await ledger.memory.get(ADA, "brief") is None
            assert [item.key for item in await ledger.memory.search(ADA)] == ["lasting"]
            assert await ledger.memory.list_namespaces() == [ADA]
            assert await ledger.memory.delete(ADA, "brief") is False

    async def test_refresh_starts_the_time_to_live_again(self, harness: Harness) -> None:
        clock = SettableClock()
        async with ledger_with(harness, clock=clock) as ledger:
            await ledger.memory.put(ADA, "k", {"v": 1}, ttl_minutes=10)
            await ledger.memory.put(ADA, "forever", {"v": 2})
            clock.advance(8 * MINUTE)
            assert (await ledger.memory.get(ADA, "k")).expires_at == clock.now + 2 * MINUTE
            refreshed = await ledger.memory.refresh([(ADA, "k"), (ADA, "forever"), (ADA, "no")])
            assert refreshed == 1  # only an item with a time to live
            assert (await ledger.memory.get(ADA, "k")).expires_at == clock.now + 10 * MINUTE
            clock.advance(9 * MINUTE)
            stored = await ledger.memory.get(ADA, "k")
            assert (stored.revision, stored.updated_at) == (1, stored.created_at)

    async def test_an_expired_item_is_not_refreshed_back(self, harness: Harness) -> None:
        clock = SettableClock()
        async with ledger_with(harness, clock=clock) as ledger:
            await ledger.memory.put(ADA, "k", {"v": 1}, ttl_minutes=1)
            clock.advance(2 * MINUTE)
            assert await ledger.memory.refresh([(ADA, "k")]) == 0
            assert await ledger.memory.get(ADA, "k") is None

    async def test_an_item_put_over_an_expired_one_is_created_anew(self, harness: Harness) -> None:
        clock = SettableClock()
        async with ledger_with(harness, clock=clock) as ledger:
            await ledger.memory.put(ADA, "k", {"v": 1}, ttl_minutes=1)
            clock.advance(2 * MINUTE)
            again = await ledger.memory.put(ADA, "k", {"v": 2})
            created = await ledger.memory.put(ADA, "c", {"v": 1}, ttl_minutes=1)
            clock.advance(2 * MINUTE)
            recreated = await ledger.memory.put(ADA, "c", {"v": 2}, expected_revision=0)
        assert (again.created_at, again.expires_at) == (again.updated_at, None)
        assert again.revision == 2
        assert recreated.created_at > created.created_at

    async def test_expired_lists_what_ran_out_a_page_at_a_time(self, harness: Harness) -> None:
        clock = SettableClock()
        async with ledger_with(harness, clock=clock) as ledger:
            for index in range(3):
                await ledger.memory.put(ADA, f"brief{index}", {}, ttl_minutes=1 + index)
            await ledger.memory.put(ADA, "lasting", {}, ttl_minutes=60)
            clock.advance(10 * MINUTE)
            first = await ledger.memory.expired(limit=2)
            last = first[-1]
            rest = await ledger.memory.expired(after=(last.expires_at, last.namespace, last.key))
        assert [item.key for item in first + rest] == ["brief0", "brief1", "brief2"]

    async def test_delete_expired_deletes_only_what_is_still_expired(
        self, harness: Harness
    ) -> None:
        clock = SettableClock()
        async with ledger_with(harness, clock=clock) as ledger:
            await ledger.memory.put(ADA, "gone", {}, ttl_minutes=1)
            await ledger.memory.put(ADA, "rewritten", {}, ttl_minutes=1)
            clock.advance(2 * MINUTE)
            listed = await ledger.memory.expired()
            await ledger.memory.put(ADA, "rewritten", {"again": True})
            deleted = await ledger.memory.delete_expired([(i.namespace, i.key) for i in listed])
            assert deleted == [(ADA, "gone")]
            assert [item.key for item in await ledger.memory.search(ADA)] == ["rewritten"]
            assert await ledger.memory.expired() == []

    async def test_delete_expired_names_each_deleted_item_once_in_the_order_given(
        self, harness: Harness
    ) -> None:
        clock = SettableClock()
        other = ("memories", "bob")
        async with ledger_with(harness, clock=clock) as ledger:
            for namespace in (ADA, other):
                await ledger.memory.put(namespace, "brief", {}, ttl_minutes=1)
            clock.advance(2 * MINUTE)
            given = [(other, "brief"), (ADA, "brief"), (other, "brief"), (ADA, "never")]
            deleted = await ledger.memory.delete_expired(given)
            assert deleted == [(other, "brief"), (ADA, "brief")]
            assert await ledger.memory.expired() == []


class MemoryKeywordContract:
    """Keyword search: the items whose text holds a query's words, most words first."""

    async def test_a_keyword_finds_whole_words_whatever_their_case(self, harness: Harness) -> None:
        memory = harness.ledger.memory
        await memory.put(ADA, "greeting", {}, text="Hello World, mail ada@example.com")
        await memory.put(ADA, "code", {}, text="call snake_case_name() at 3.14")
        found = {
            query: [item.key for item in await memory.search(ADA, words=query)]
            for query in (
                "hello",
                "WORLD",
                "ada",
                "example",
                "snake_case_name",
                "14",
                "hell",
                "snake",
            )
        }
        assert found == {
            "hello": ["greeting"],
            "WORLD": ["greeting"],
            "ada": ["greeting"],
            "example": ["greeting"],
            "snake_case_name": ["code"],
            "14": ["code"],
            "hell": [],
            "snake": [],
        }

    async def test_items_holding_more_of_the_words_come_first_then_the_newest(
        self, harness: Harness
    ) -> None:
        clock = SettableClock()
        async with ledger_with(harness, clock=clock) as ledger:
            for key, text in [("old", "pasta soup"), ("one", "pasta"), ("new", "soup pasta")]:
                await ledger.memory.put(ADA, key, {}, text=text)
                clock.advance(MINUTE)
            found = await ledger.memory.search(ADA, words="pasta soup bread")
        assert [(item.key, item.score) for item in found] == [
            ("new", 2.0),
            ("old", 2.0),
            ("one", 1.0),
        ]

    async def test_a_word_of_a_script_without_spaces_is_found_inside_a_longer_run(
        self, harness: Harness
    ) -> None:
        memory = harness.ledger.memory
        await memory.put(ADA, "tokyo", {}, text="東京タワーに行きました")
        assert [item.key for item in await memory.search(ADA, words="東京")] == ["tokyo"]

    async def test_short_words_and_common_words_are_found_too(self, harness: Harness) -> None:
        memory = harness.ledger.memory
        await memory.put(ADA, "short", {}, text="a to the is of")
        for query in ("a", "the", "is"):
            assert [item.key for item in await memory.search(ADA, words=query)] == ["short"]

    async def test_an_item_with_a_great_many_words_is_found_by_any_of_them(
        self, harness: Harness
    ) -> None:
        memory = harness.ledger.memory
        text = " ".join(f"w{number}" for number in range(30_000))
        await memory.put(ADA, "long", {}, text=text)
        await memory.put(ADA, "short", {}, text="w7 only")
        assert [item.key for item in await memory.search(ADA, words="w29999")] == ["long"]
        assert [item.key for item in await memory.search(ADA, words="w7")] == ["short", "long"]

    async def test_rewritten_text_is_found_by_its_new_words_only(self, harness: Harness) -> None:
        memory = harness.ledger.memory
        await memory.put(ADA, "note", {}, text="pasta tonight")
        await memory.put(ADA, "note", {"v": 2}, text="soup tonight")
        assert await memory.search(ADA, words="pasta") == []
        assert [item.value for item in await memory.search(ADA, words="soup")] == [{"v": 2}]
        await memory.delete(ADA, "note")
        assert await memory.search(ADA, words="tonight") == []

    async def test_a_keyword_search_keeps_to_its_prefix_and_meets_the_filter(
        self, harness: Harness
    ) -> None:
        memory = harness.ledger.memory
        await memory.put(ADA, "a", {"kind": "food"}, text="pasta")
        await memory.put(ADA, "b", {"kind": "trip"}, text="pasta in rome")
        await memory.put(("memories", "bob"), "c", {"kind": "food"}, text="pasta")
        await memory.put(ADA, "d", {"kind": "food"}, text=None)
        assert [
            i.key for i in await memory.search(ADA, words="pasta", filter={"kind": "food"})
        ] == ["a"]
        everyone = await memory.search(("memories",), words="pasta", limit=2, offset=1)
        assert [item.key for item in everyone] == ["b", "a"]

    async def test_a_unit_of_work_finds_the_items_it_wrote(self, harness: Harness) -> None:
        async with harness.ledger.unit_of_work() as uow:
            await uow.memory.put(ADA, "fresh", {}, text="written just now")
            found = await uow.memory.search(ADA, words="written")
        assert [item.key for item in found] == ["fresh"]

    async def test_an_expired_item_is_not_found(self, harness: Harness) -> None:
        clock = SettableClock()
        async with ledger_with(harness, clock=clock) as ledger:
            await ledger.memory.put(ADA, "brief", {}, text="pasta", ttl_minutes=1)
            clock.advance(2 * MINUTE)
            assert await ledger.memory.search(ADA, words="pasta") == []

    @tier("logic")
    async def test_a_query_without_a_word_finds_nothing(self, harness: Harness) -> None:
        await harness.ledger.memory.put(ADA, "a", {}, text="pasta")
        assert await harness.ledger.memory.search(ADA, words=" ,.!? ") == []

    @tier("logic")
    async def test_words_and_a_query_vector_together_are_refused(self, harness: Harness) -> None:
        with pytest.raises(ValidationError, match="not both"):
            await harness.ledger.memory.search(ADA, words="pasta", query_vector=[1.0, 0.0])

    @tier("logic")
    async def test_a_keyword_query_too_long_is_refused(self, harness: Harness) -> None:
        with pytest.raises(ValidationError) as refused:
            await harness.ledger.memory.search(ADA, words="w " * 5001)
        assert refused.value.path == "words"


@tier("driver")
class MemoryConcurrencyContract:
    """Concurrent writers of one item."""

    async def test_concurrent_plain_puts_of_one_item_all_land_one_after_another(
        self, harness: Harness
    ) -> None:
        writers = 8
        barrier = harness.barrier(writers)

        async def writer(index: int) -> None:
            await barrier.wait()
            await harness.ledger.memory.put(ADA, "shared", {"by": index, "copy": [index] * 50})

        await harness.concurrently(writers, writer)
        final = await harness.ledger.memory.get(ADA, "shared")
        assert final.revision == writers
        assert final.value["copy"] == [final.value["by"]] * 50  # one writer's, whole

    async def test_compare_and_set_puts_from_one_read_exactly_one_wins(
        self, harness: Harness
    ) -> None:
        writers = 8
        read = await harness.ledger.memory.put(ADA, "cas", {"by": None})
        barrier = harness.barrier(writers)

        async def writer(index: int) -> bool:
            await barrier.wait()
            try:
                await harness.ledger.memory.put(
                    ADA, "cas", {"by": index}, expected_revision=read.revision
                )
            except ConflictError as conflict:
                assert conflict.reason == "stale"
                return False
            return True

        won = await harness.concurrently(writers, writer)
        final = await harness.ledger.memory.get(ADA, "cas")
        assert won.count(True) == 1
        assert (final.revision, final.value) == (2, {"by": won.index(True)})

    async def test_concurrent_creates_exactly_one_wins(self, harness: Harness) -> None:
        writers = 8
        barrier = harness.barrier(writers)

        async def writer(index: int) -> bool:
            await barrier.wait()
            try:
                await harness.ledger.memory.put(ADA, "new", {"by": index}, expected_revision=0)
            except ConflictError as conflict:
                assert conflict.reason == "exists"
                return False
            return True

        won = await harness.concurrently(writers, writer)
        assert won.count(True) == 1
        assert (await harness.ledger.memory.get(ADA, "new")).value == {"by": won.index(True)}
