"""ADK's memory service on agentledger: events and entries remembered once, searched by
whole words within one user's memories, forgotten one, one session's or all at a
time, and picked by ``adk web`` for an ``agentledger+`` URI."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.adk.cli.utils.service_factory import create_memory_service_from_options
from google.adk.events.event import Event
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.session import Session
from google.genai import types

from agentledger import AsyncLedger, ValidationError, migrations
from agentledger.integrations.adk import LedgerMemoryService, memory_from_uri, register


def _event(id: str, text: str | None, author: str = "user", at: float = 1_780_000_000) -> Event:
    parts = [] if text is None else [types.Part(text=text)]
    return Event(
        id=id, author=author, timestamp=at, content=types.Content(role="user", parts=parts)
    )


def _session(id: str, *events: Event, user: str = "ada") -> Session:
    return Session(id=id, app_name="trips", user_id=user, events=list(events))


async def _texts(service: LedgerMemoryService, query: str, user: str = "ada") -> list[str]:
    found = await service.search_memory(app_name="trips", user_id=user, query=query)
    return [memory.content.parts[0].text or "" for memory in found.memories]


async def test_a_sessions_events_are_remembered_once_and_found_by_a_word(
    ledger: AsyncLedger,
) -> None:
    service = LedgerMemoryService(ledger)
    session = _session(
        "s1", _event("e1", "I like trains"), _event("e2", None), _event("e3", "Porto please")
    )
    await service.add_session_to_memory(session)
    await service.add_session_to_memory(session)  # again: nothing twice

    found = await service.search_memory(app_name="trips", user_id="ada", query="TRAINS?")

    (memory,) = found.memories
    assert (memory.id, memory.author, memory.content.parts[0].text) == (
        "e1",
        "user",
        "I like trains",
    )
    assert memory.timestamp is not None and memory.timestamp.startswith("2026-05-28")
    assert len(await ledger.memory.search(("adk", "trips", "ada"))) == 2  # not e2: no text


async def test_a_word_matches_whole_words_only_and_a_cjk_word_anywhere(
    ledger: AsyncLedger,
) -> None:
    service = LedgerMemoryService(ledger)
    await service.add_events_to_memory(
        app_name="trips",
        user_id="ada",
        events=[_event("e1", "python scripts"), _event("e2", "我喜欢火车旅行")],
    )
    assert await _texts(service, "thon") == []
    assert await _texts(service, "Python") == ["python scripts"]
    assert await _texts(service, "火车") == ["我喜欢火车旅行"]


async def test_the_memories_holding_more_of_the_words_come_first_and_at_most_max_results(
    ledger: AsyncLedger,
) -> None:
    service = LedgerMemoryService(ledger, max_results=2)
    await service.add_events_to_memory(
        app_name="trips",
        user_id="ada",
        events=[
            _event("one", "train"),
            _event("two", "train to porto"),
            _event("three", "train"),
        ],
    )
    assert await _texts(service, "train porto") == ["train to porto", "train"]


async def test_a_users_memories_are_theirs_alone(ledger: AsyncLedger) -> None:
    service = LedgerMemoryService(ledger)
    await service.add_session_to_memory(_session("s1", _event("e1", "secret plan"), user="ada"))
    assert await _texts(service, "secret", user="bob") == []
    found = await service.search_memory(app_name="other", user_id="ada", query="secret")
    assert found.memories == []


async def test_entries_are_added_as_they_are_under_their_ids(ledger: AsyncLedger) -> None:
    service = LedgerMemoryService(ledger)
    content = types.Content(role="model", parts=[types.Part(text="ada prefers aisle seats")])
    await service.add_memory(
        app_name="trips",
        user_id="ada",
        memories=[
            MemoryEntry(id="seat", content=content, author="planner", custom_metadata={"k": 1}),
            MemoryEntry(content=content),
        ],
        custom_metadata={"source": "import"},
    )
    found = (await service.search_memory(app_name="trips", user_id="ada", query="aisle")).memories
    assert len(found) == 2
    seat = next(memory for memory in found if memory.id == "seat")
    assert (seat.author, seat.custom_metadata) == ("planner", {"source": "import", "k": 1})


async def test_one_memory_one_sessions_or_all_of_a_users_are_forgotten(
    ledger: AsyncLedger,
) -> None:
    service = LedgerMemoryService(ledger)
    await service.add_session_to_memory(_session("s1", _event("a", "train one")))
    await service.add_session_to_memory(_session("s2", _event("b", "train two")))
    await service.add_session_to_memory(_session("s3", _event("c", "train three")))
    await service.add_session_to_memory(_session("s9", _event("z", "train bob"), user="bob"))

    await service.delete_memory(app_name="trips", user_id="ada", memory_id="a")
    assert sorted(await _texts(service, "train")) == ["train three", "train two"]
    removed = await service.delete_session_memories(
        app_name="trips", user_id="ada", session_id="s2"
    )
    assert removed == 1 and await _texts(service, "train") == ["train three"]
    await service.delete_memory(app_name="trips", user_id="ada")
    assert await _texts(service, "train") == []
    assert await _texts(service, "train", user="bob") == ["train bob"]


async def test_an_entry_that_is_not_a_memory_entry_is_refused_and_nothing_stored(
    ledger: AsyncLedger,
) -> None:
    service = LedgerMemoryService(ledger)
    content = types.Content(role="model", parts=[types.Part(text="kept?")])
    with pytest.raises(ValidationError, match="not a MemoryEntry"):
        await service.add_memory(
            app_name="trips",
            user_id="ada",
            memories=[MemoryEntry(content=content), {"content": "hostile"}],  # type: ignore[list-item]
        )
    assert await _texts(service, "kept") == []


@pytest.mark.parametrize("bad", [0, -1, 10_001, True, "10"])
def test_max_results_must_be_an_int_from_1_to_10000(bad: object) -> None:
    with pytest.raises(ValidationError) as refused:
        LedgerMemoryService("sqlite://", max_results=bad)  # type: ignore[arg-type]
    assert refused.value.path == "max_results"


async def test_adk_picks_the_memory_service_for_an_agentledger_uri(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    migrations.upgrade(url)
    register()
    service = create_memory_service_from_options(
        base_dir=tmp_path, memory_service_uri=f"agentledger+{url}"
    )
    assert isinstance(service, LedgerMemoryService)
    try:
        await service.add_session_to_memory(_session("s1", _event("e1", "hello there")))
        assert await _texts(service, "hello") == ["hello there"]
    finally:
        await service.close()


def test_a_memory_uri_of_another_scheme_is_refused_naming_the_prefix() -> None:
    with pytest.raises(ValidationError, match="agentledger\\+"):
        memory_from_uri("sqlite:///agents.db")


async def test_a_bare_agentledger_memory_uri_means_the_configured_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'configured.db'}"
    migrations.upgrade(url)
    monkeypatch.setenv("AGENTLEDGER_DATABASE_URL", url)
    service = memory_from_uri("agentledger://")
    try:
        await service.add_session_to_memory(_session("s1", _event("e1", "kept here")))
    finally:
        await service.close()
    async with AsyncLedger(url) as ledger:
        assert [item.text for item in await ledger.memory.search(("adk",))] == ["kept here"]


@pytest.mark.parametrize("query", ["", "   \n\t  ", "?!, ..."], ids=["empty", "blank", "marks"])
async def test_a_query_without_a_word_finds_nothing(ledger: AsyncLedger, query: str) -> None:
    service = LedgerMemoryService(ledger)
    await service.add_session_to_memory(_session("s1", _event("e1", "hello there")))
    found = await service.search_memory(app_name="trips", user_id="ada", query=query)
    assert found.memories == []
