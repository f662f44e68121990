"""LedgerSessionService keeps ADK's session service contract, on every async backend.

Written from ``BaseSessionService``'s documentation and the installed source of ADK's
``InMemorySessionService`` and ``DatabaseSessionService``: what they return, what they
store, which ADK error each failure is.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.sessions.session import Session
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from agentledger import AsyncLedger, ValidationError
from agentledger.integrations import framework_of, new_session_id
from agentledger.integrations.adk import LedgerSessionService
from agentledger.testing import tier

APP, USER = "travel agent", "ada@example.com"
T0 = 1_780_000_000.0


def event(
    text: str | None = "hello",
    *,
    author: str = "user",
    delta: dict[str, Any] | None = None,
    at: float | None = None,
    **fields: Any,
) -> Event:
    content = None if text is None else types.Content(role="user", parts=[types.Part(text=text)])
    if at is not None:
        fields["timestamp"] = at
    return Event(
        author=author,
        invocation_id="inv-1",
        content=content,
        actions=EventActions(state_delta=delta or {}),
        **fields,
    )


async def created(service: LedgerSessionService, **options: Any) -> Session:
    options = {"app_name": APP, "user_id": USER, **options}
    return await service.create_session(**options)


async def reread(service: LedgerSessionService, session: Session, **config: Any) -> Session:
    found = await service.get_session(
        app_name=session.app_name,
        user_id=session.user_id,
        session_id=session.id,
        config=GetSessionConfig(**config) if config else None,
    )
    assert found is not None
    return found


def texts(session: Session) -> list[str | None]:
    return [
        e.content.parts[0].text if e.content and e.content.parts else None for e in session.events
    ]


# -- create_session ---------------------------------------------------------------------


async def test_create_without_an_id_generates_one_that_get_finds(
    service: LedgerSessionService,
) -> None:
    session = await created(service)
    assert session.id and session.events == []
    assert (await reread(service, session)).id == session.id


async def test_create_with_an_id_keeps_it_as_the_ledger_sessions_external_key(
    service: LedgerSessionService, ledger: AsyncLedger
) -> None:
    session = await created(service, session_id="any text: ADK's own / id")
    record = await ledger.sessions.get_by_key(session.id, app_name=APP, user_id=USER)
    assert session.id == "any text: ADK's own / id"
    assert framework_of(record.id) == "adk"


async def test_create_of_an_id_the_user_already_has_raises_already_exists_and_writes_nothing(
    service: LedgerSessionService, ledger: AsyncLedger
) -> None:
    await created(service, session_id="s1", state={"app:k": 1})
    with pytest.raises(AlreadyExistsError):
        await created(service, session_id="s1", state={"app:k": 2, "mine": True})
    assert (await ledger.app_state.get(APP)).state == {"k": 1}
    assert (await reread(service, Session(id="s1", app_name=APP, user_id=USER))).state == {
        "app:k": 1
    }


async def test_the_same_id_for_two_users_is_two_sessions(service: LedgerSessionService) -> None:
    mine = await created(service, session_id="s1", state={"who": "ada"})
    theirs = await created(service, session_id="s1", user_id="bob", state={"who": "bob"})
    assert (await reread(service, mine)).state == {"who": "ada"}
    assert (await reread(service, theirs)).state == {"who": "bob"}


async def test_create_splits_state_into_app_user_and_session_state_and_drops_temp(
    service: LedgerSessionService, ledger: AsyncLedger
) -> None:
    state = {"plan": [1, 2], "app:currency": "EUR", "user:home": "Porto", "temp:scratch": 1}
    session = await created(service, state=state)
    record = await ledger.sessions.get_by_key(session.id, app_name=APP, user_id=USER)
    assert record.state == {"plan": [1, 2]}
    assert (await ledger.app_state.get(APP)).state == {"currency": "EUR"}
    assert (await ledger.user_state.get(APP, USER)).state == {"home": "Porto"}
    merged = {"plan": [1, 2], "app:currency": "EUR", "user:home": "Porto"}
    assert session.state == merged
    assert (await reread(service, session)).state == merged


@tier("driver")
async def test_concurrent_creators_of_one_id_make_one_session(
    service: LedgerSessionService, ledger: AsyncLedger
) -> None:
    results = await asyncio.gather(
        *(created(service, session_id="race", state={"n": n}) for n in range(4)),
        return_exceptions=True,
    )
    won = [r for r in results if isinstance(r, Session)]
    lost = [r for r in results if not isinstance(r, Session)]
    assert len(won) == 1 and all(isinstance(r, AlreadyExistsError) for r in lost)
    assert (await reread(service, won[0])).state == won[0].state
    assert len((await ledger.sessions.list(app_name=APP)).items) == 1


@pytest.mark.parametrize(
    "state",
    [{"when": datetime(2026, 1, 1, tzinfo=UTC)}, {"app:n": float("nan")}, {"user:s": {1, 2}}],
    ids=["datetime", "nan-app", "set-user"],
)
@tier("logic")
async def test_create_refuses_state_that_is_not_json_and_stores_nothing(
    service: LedgerSessionService, ledger: AsyncLedger, state: dict[str, Any]
) -> None:
    with pytest.raises(ValidationError):
        await created(service, session_id="s1", state={"ok": 1, **state})
    assert (await ledger.sessions.list(app_name=APP)).items == []
    assert (await ledger.app_state.get(APP)).revision == 0
    assert (await ledger.user_state.get(APP, USER)).revision == 0


@pytest.mark.parametrize("field", ["app_name", "user_id"])
@tier("logic")
async def test_create_refuses_an_app_name_or_user_id_over_255_characters(
    service: LedgerSessionService, ledger: AsyncLedger, field: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        await created(service, **{field: "x" * 256})
    assert raised.value.path == field
    assert (await ledger.sessions.list()).items == []


# -- get_session ------------------------------------------------------------------------


async def test_get_of_an_unknown_session_is_none(service: LedgerSessionService) -> None:
    await created(service, session_id="s1")
    for app, user, sid in ((APP, USER, "s2"), (APP, "bob", "s1"), ("other", USER, "s1")):
        assert await service.get_session(app_name=app, user_id=user, session_id=sid) is None


async def test_get_returns_every_event_oldest_first_as_it_was_appended(
    service: LedgerSessionService,
) -> None:
    session = await created(service)
    appended = [event(f"m{i}", at=T0 + i) for i in range(3)]
    for item in appended:
        await service.append_event(session, item)
    found = await reread(service, session)
    assert found.events == appended == session.events


async def test_get_with_num_recent_events_returns_the_newest_n(
    service: LedgerSessionService,
) -> None:
    session = await created(service)
    for i in range(5):
        await service.append_event(session, event(f"m{i}", at=T0 + i))
    assert texts(await reread(service, session, num_recent_events=2)) == ["m3", "m4"]


async def test_get_with_num_recent_events_zero_returns_no_events_but_the_state(
    service: LedgerSessionService,
) -> None:
    session = await created(service, state={"k": 1})
    await service.append_event(session, event(at=T0))
    found = await reread(service, session, num_recent_events=0)
    assert found.events == [] and found.state == {"k": 1}


async def test_get_with_after_timestamp_is_inclusive(service: LedgerSessionService) -> None:
    session = await created(service)
    for i in range(4):
        await service.append_event(session, event(f"m{i}", at=T0 + i + 0.25))
    assert texts(await reread(service, session, after_timestamp=T0 + 2.25)) == ["m2", "m3"]


async def test_get_with_both_returns_the_newest_n_at_or_after_the_time(
    service: LedgerSessionService,
) -> None:
    session = await created(service)
    for i in range(5):
        await service.append_event(session, event(f"m{i}", at=T0 + i))
    found = await reread(service, session, after_timestamp=T0 + 1, num_recent_events=2)
    assert texts(found) == ["m3", "m4"]
    found = await reread(service, session, after_timestamp=T0 + 3, num_recent_events=5)
    assert texts(found) == ["m3", "m4"]


async def test_events_with_tied_timestamps_keep_their_append_order(
    service: LedgerSessionService,
) -> None:
    session = await created(service)
    for name in ("first", "second", "third"):
        await service.append_event(session, event(name, at=T0))
    assert texts(await reread(service, session)) == ["first", "second", "third"]
    assert texts(await reread(service, session, num_recent_events=2)) == ["second", "third"]
    assert texts(await reread(service, session, after_timestamp=T0, num_recent_events=1)) == [
        "third"
    ]


# -- last_update_time: the newest event's own time ------------------------------------------


async def test_last_update_time_follows_the_appended_event_s_timestamp(
    service: LedgerSessionService,
) -> None:
    # ADK's own test_session_last_update_time_updates_on_event.
    session = await created(service)
    original = session.last_update_time
    await service.append_event(session, event(at=original + 10))
    assert session.last_update_time == pytest.approx(original + 10, abs=1e-6)
    found = await reread(service, session)
    assert found.last_update_time == pytest.approx(original + 10, abs=1e-6)
    assert found.last_update_time > original


async def test_last_update_time_is_the_newest_event_s_whatever_events_a_read_returns(
    service: LedgerSessionService,
) -> None:
    session = await created(service)
    for i in range(3):
        await service.append_event(session, event(f"m{i}", at=T0 + i))
    for config in ({"num_recent_events": 0}, {"after_timestamp": T0 + 5}, {}):
        found = await reread(service, session, **config)
        assert found.last_update_time == pytest.approx(T0 + 2, abs=1e-6)


async def test_a_session_without_events_was_last_updated_when_it_was_created(
    service: LedgerSessionService,
) -> None:
    before = datetime.now(UTC).timestamp()
    session = await created(service)
    assert before - 1 <= session.last_update_time <= datetime.now(UTC).timestamp() + 1
    assert (await reread(service, session)).last_update_time == session.last_update_time


async def test_listed_sessions_carry_their_newest_event_s_time(
    service: LedgerSessionService,
) -> None:
    first = await created(service, session_id="s1")
    await service.append_event(first, event(at=T0 + 7))
    empty = await created(service, session_id="s2")
    listed = {s.id: s for s in (await service.list_sessions(app_name=APP, user_id=USER)).sessions}
    assert listed["s1"].last_update_time == pytest.approx(T0 + 7, abs=1e-6)
    assert listed["s2"].last_update_time == pytest.approx(empty.last_update_time, abs=1e-6)


async def test_a_writer_whose_session_is_stale_is_refused_whatever_its_events_times(
    service: LedgerSessionService,
) -> None:
    # The revision, not the time, tells a stale writer: an event timed in the past by a
    # fresh writer is taken, and a stale writer's event timed after every other refused.
    session = await created(service, session_id="t")
    other = await reread(service, session)
    await service.append_event(session, event("fresh", at=T0 - 100))
    with pytest.raises(StaleSessionError):
        await service.append_event(other, event("stale", at=T0 + 100))
    assert texts(await reread(service, session)) == ["fresh"]


# -- session ids: surrounding whitespace, as ADK's own services treat it ---------------------


async def test_a_padded_session_id_is_stored_stripped(service: LedgerSessionService) -> None:
    session = await created(service, session_id="  padded  ")
    assert session.id == "padded"
    found = await service.get_session(app_name=APP, user_id=USER, session_id="padded")
    assert found is not None and found.id == "padded"


async def test_a_padded_id_finds_and_deletes_the_stripped_session(
    service: LedgerSessionService,
) -> None:
    await created(service, session_id="padded")
    found = await service.get_session(app_name=APP, user_id=USER, session_id="\tpadded ")
    assert found is not None and found.id == "padded"
    with pytest.raises(AlreadyExistsError):
        await created(service, session_id=" padded")
    await service.delete_session(app_name=APP, user_id=USER, session_id=" padded ")
    assert await service.get_session(app_name=APP, user_id=USER, session_id="padded") is None


async def test_a_session_stored_under_its_padded_id_earlier_is_still_found_by_it(
    service: LedgerSessionService,
) -> None:
    # Stored verbatim by a version that kept the padding (as DatabaseSessionService does).
    await service.ledger.sessions.create(
        new_session_id("adk", datetime.now(UTC)), app_name=APP, user_id=USER, external_key=" old "
    )
    found = await service.get_session(app_name=APP, user_id=USER, session_id=" old ")
    assert found is not None and found.id == " old "


async def test_a_blank_session_id_gets_a_generated_one(service: LedgerSessionService) -> None:
    session = await created(service, session_id="   ")
    assert session.id.strip() == session.id and len(session.id) > 8


# -- list_sessions ----------------------------------------------------------------------


async def test_list_of_one_user_has_their_sessions_with_merged_state_and_no_events(
    service: LedgerSessionService,
) -> None:
    first = await created(service, session_id="s1", state={"n": 1, "app:a": 1, "user:u": 1})
    await service.append_event(first, event(at=T0))
    await created(service, session_id="s2", state={"n": 2})
    await created(service, session_id="s3", user_id="bob", state={"user:u": "bob's"})
    listed = (await service.list_sessions(app_name=APP, user_id=USER)).sessions
    assert [(s.id, s.state, s.events) for s in listed] == [
        ("s1", {"n": 1, "app:a": 1, "user:u": 1}, []),
        ("s2", {"n": 2, "app:a": 1, "user:u": 1}, []),
    ]


async def test_list_of_every_user_gives_each_session_its_own_users_state(
    service: LedgerSessionService,
) -> None:
    await created(service, session_id="s1", state={"user:u": "ada's"})
    await created(service, session_id="s2", user_id="bob", state={"user:u": "bob's"})
    listed = (await service.list_sessions(app_name=APP)).sessions
    assert [(s.user_id, s.state) for s in listed] == [
        (USER, {"user:u": "ada's"}),
        ("bob", {"user:u": "bob's"}),
    ]


async def test_list_is_least_recently_updated_first(service: LedgerSessionService) -> None:
    old = await created(service, session_id="old")
    await created(service, session_id="new")
    await service.append_event(old, event())
    listed = (await service.list_sessions(app_name=APP, user_id=USER)).sessions
    assert [s.id for s in listed] == ["new", "old"]


async def test_list_leaves_out_other_apps_and_sessions_no_adk_service_made(
    service: LedgerSessionService, ledger: AsyncLedger
) -> None:
    await created(service, session_id="mine")
    await created(service, session_id="elsewhere", app_name="other app")
    await ledger.sessions.create(app_name=APP, user_id=USER, external_key="not-adk")
    listed = (await service.list_sessions(app_name=APP)).sessions
    assert [s.id for s in listed] == ["mine"]
    assert (await service.list_sessions(app_name="no such app")).sessions == []


# -- delete_session ---------------------------------------------------------------------


async def test_delete_removes_the_session_and_its_events_but_not_app_or_user_state(
    service: LedgerSessionService, ledger: AsyncLedger
) -> None:
    session = await created(service, state={"app:a": 1, "user:u": 2})
    await service.append_event(session, event())
    await service.delete_session(app_name=APP, user_id=USER, session_id=session.id)
    assert await service.get_session(app_name=APP, user_id=USER, session_id=session.id) is None
    assert (await ledger.sessions.list()).items == []
    assert (await ledger.app_state.get(APP)).state == {"a": 1}
    assert await service.get_user_state(app_name=APP, user_id=USER) == {"u": 2}


async def test_delete_of_an_unknown_session_does_nothing(service: LedgerSessionService) -> None:
    kept = await created(service, session_id="kept")
    await service.delete_session(app_name=APP, user_id=USER, session_id="unknown")
    await service.delete_session(app_name=APP, user_id="bob", session_id="kept")
    assert (await reread(service, kept)).id == "kept"


# -- append_event -----------------------------------------------------------------------


async def test_append_stores_the_event_as_one_message_keyed_by_its_id_at_its_time(
    service: LedgerSessionService, ledger: AsyncLedger
) -> None:
    session = await created(service)
    before = await ledger.sessions.get_by_key(session.id, app_name=APP, user_id=USER)
    stored = await service.append_event(session, event("hi", at=T0 + 0.5))
    after = await ledger.sessions.get_by_key(session.id, app_name=APP, user_id=USER)
    (message,) = await ledger.messages.all(after.id)
    assert after.revision == before.revision + 1
    assert (message.role, message.external_key) == ("user", stored.id)
    assert message.created_at == datetime.fromtimestamp(T0 + 0.5, UTC)
    assert message.content == {"parts": [{"text": "hi"}], "role": "user"}


async def test_append_applies_each_scopes_delta_in_one_revision_step(
    service: LedgerSessionService, ledger: AsyncLedger
) -> None:
    session = await created(service, state={"keep": 0})
    delta = {"step": 1, "app:calls": 7, "user:lang": "pt"}
    await service.append_event(session, event(delta=delta))
    record = await ledger.sessions.get_by_key(session.id, app_name=APP, user_id=USER)
    assert record.state == {"keep": 0, "step": 1}
    assert (await ledger.app_state.get(APP)).state == {"calls": 7}
    assert (await ledger.user_state.get(APP, USER)).state == {"lang": "pt"}
    expected = {"keep": 0, "step": 1, "app:calls": 7, "user:lang": "pt"}
    assert session.state == expected == (await reread(service, session)).state


async def test_user_and_app_state_reach_the_users_other_sessions(
    service: LedgerSessionService,
) -> None:
    first = await created(service)
    other = await created(service)
    bob = await created(service, user_id="bob")
    await service.append_event(first, event(delta={"app:a": 1, "user:u": 2}))
    assert (await reread(service, other)).state == {"app:a": 1, "user:u": 2}
    assert (await reread(service, bob)).state == {"app:a": 1}


async def test_temp_state_is_visible_on_the_session_but_never_stored(
    service: LedgerSessionService, ledger: AsyncLedger
) -> None:
    session = await created(service)
    returned = await service.append_event(session, event(delta={"temp:draft": "x", "kept": 1}))
    assert session.state == {"temp:draft": "x", "kept": 1}
    assert returned.actions.state_delta == {"kept": 1}
    found = await reread(service, session)
    assert found.state == {"kept": 1}
    assert found.events[0].actions.state_delta == {"kept": 1}
    (message,) = await ledger.messages.all(
        (await ledger.sessions.get_by_key(session.id, app_name=APP, user_id=USER)).id
    )
    assert "temp:draft" not in str(message.metadata)


async def test_a_partial_event_is_returned_untouched_and_not_stored(
    service: LedgerSessionService,
) -> None:
    session = await created(service)
    partial = event("streaming", delta={"k": 1}, partial=True)
    assert await service.append_event(session, partial) is partial
    assert session.events == [] and session.state == {}
    assert (await reread(service, session)).events == []


async def test_append_to_an_unknown_session_raises_session_not_found(
    service: LedgerSessionService,
) -> None:
    ghost = Session(id="ghost", app_name=APP, user_id=USER)
    with pytest.raises(SessionNotFoundError):
        await service.append_event(ghost, event())


async def test_append_to_a_deleted_session_raises_session_not_found(
    service: LedgerSessionService,
) -> None:
    session = await created(service)
    await service.delete_session(app_name=APP, user_id=USER, session_id=session.id)
    with pytest.raises(SessionNotFoundError):
        await service.append_event(session, event())


async def test_a_superseded_session_object_raises_stale_and_stores_nothing(
    service: LedgerSessionService, ledger: AsyncLedger
) -> None:
    session = await created(service)
    mine, theirs = await reread(service, session), await reread(service, session)
    await service.append_event(theirs, event("theirs", delta={"k": "theirs"}))
    with pytest.raises(StaleSessionError):
        await service.append_event(mine, event("mine", delta={"k": "mine", "app:x": 1}))
    found = await reread(service, session)
    assert texts(found) == ["theirs"] and found.state == {"k": "theirs"}
    assert mine.events == [] and mine.state == {}
    assert (await ledger.app_state.get(APP)).revision == 0


async def test_a_session_read_through_another_service_is_checked_by_its_revision(
    service: LedgerSessionService, ledger: AsyncLedger
) -> None:
    session = await created(service)
    elsewhere = LedgerSessionService(ledger)  # another process's service, say
    current = await reread(elsewhere, session)
    superseded = await reread(elsewhere, session)
    await service.append_event(current, event("accepted"))
    with pytest.raises(StaleSessionError):
        await service.append_event(superseded, event("refused"))
    assert texts(await reread(service, session)) == ["accepted"]


async def test_retrying_an_append_whose_outcome_was_unknown_stores_the_event_once(
    service: LedgerSessionService,
) -> None:
    session = await created(service)
    retried = event("once", delta={"n": 1})
    before = session.model_copy(deep=True)  # what the caller held when the call failed
    await service.append_event(session, retried)
    await service.append_event(before, retried)
    found = await reread(service, session)
    assert texts(found) == ["once"] and found.state == {"n": 1}
    await service.append_event(before, event("next"))
    assert texts(await reread(service, session)) == ["once", "next"]


async def test_an_event_delivered_again_is_stored_and_applied_once(
    service: LedgerSessionService, ledger: AsyncLedger
) -> None:
    session = await created(service)
    again = event("once", delta={"app:count": 1})
    await service.append_event(session, again)
    await service.append_event(session, again)
    assert texts(session) == ["once"]
    assert texts(await reread(service, session)) == ["once"]
    assert (await ledger.app_state.get(APP)).revision == 1


async def test_a_session_object_of_a_deleted_and_recreated_id_is_stale(
    service: LedgerSessionService,
) -> None:
    old = await created(service, session_id="s1")
    await service.delete_session(app_name=APP, user_id=USER, session_id="s1")
    await created(service, session_id="s1")
    with pytest.raises(StaleSessionError):
        await service.append_event(old, event())


async def test_the_session_object_appended_to_stays_current_for_the_next_append(
    service: LedgerSessionService,
) -> None:
    session = await created(service)
    for i in range(3):
        await service.append_event(session, event(f"m{i}"))
    assert texts(await reread(service, session)) == ["m0", "m1", "m2"]


async def test_a_session_object_not_read_from_the_service_must_end_with_the_stored_event(
    service: LedgerSessionService,
) -> None:
    session = await created(service, session_id="s1")
    first = await service.append_event(session, event("first"))
    by_hand = Session(id="s1", app_name=APP, user_id=USER, events=[first])
    await service.append_event(by_hand, event("second"))
    behind = Session(id="s1", app_name=APP, user_id=USER, events=[first])
    with pytest.raises(StaleSessionError):
        await service.append_event(behind, event("third"))
    assert texts(await reread(service, session)) == ["first", "second"]


@pytest.mark.parametrize(
    "delta",
    [{"when": datetime(2026, 1, 1, tzinfo=UTC)}, {"app:n": float("inf")}, {"user:b": b"x"}],
    ids=["datetime", "inf-app", "bytes-user"],
)
@tier("logic")
async def test_append_refuses_a_state_delta_that_is_not_json_and_stores_nothing(
    service: LedgerSessionService, ledger: AsyncLedger, delta: dict[str, Any]
) -> None:
    session = await created(service)
    with pytest.raises(ValidationError):
        await service.append_event(session, event(delta={"ok": 1, **delta}))
    assert session.events == [] and session.state == {}
    assert (await reread(service, session)).events == []
    assert (await ledger.app_state.get(APP)).revision == 0
    assert (await ledger.user_state.get(APP, USER)).revision == 0


@tier("logic")
async def test_append_refuses_an_event_that_cannot_be_serialized(
    service: LedgerSessionService,
) -> None:
    session = await created(service)
    with pytest.raises(ValidationError) as raised:
        await service.append_event(session, event(custom_metadata={"handle": object()}))
    assert raised.value.path == "event"
    assert (await reread(service, session)).events == []


async def test_get_user_state_has_the_keys_without_their_prefix(
    service: LedgerSessionService,
) -> None:
    assert await service.get_user_state(app_name=APP, user_id=USER) == {}
    session = await created(service, state={"user:home": "Porto"})
    await service.append_event(session, event(delta={"user:seat": "window", "app:x": 1}))
    assert await service.get_user_state(app_name=APP, user_id=USER) == {
        "home": "Porto",
        "seat": "window",
    }


# -- behaviours ADK's own session service tests hold every backend to -------------------
# (the inventory of those tests, and where each is checked here: docs/adk-session-tests.md)


async def test_get_returns_the_session_create_returned(service: LedgerSessionService) -> None:
    session = await created(service, state={"k": "v", "app:a": 1, "user:u": 2})
    assert await reread(service, session) == session


async def test_a_new_session_starts_with_the_apps_and_its_users_stored_state(
    service: LedgerSessionService,
) -> None:
    first = await created(service, state={"app:a": 1, "user:u": 1})
    await service.append_event(first, event(delta={"app:b": 2, "user:v": 2}))
    assert (await created(service)).state == {"app:a": 1, "app:b": 2, "user:u": 1, "user:v": 2}
    assert (await created(service, user_id="bob")).state == {"app:a": 1, "app:b": 2}


async def test_session_state_stays_in_its_own_session(service: LedgerSessionService) -> None:
    first = await created(service, state={"own": 1})
    await service.append_event(first, event(delta={"more": 2}))
    assert (await created(service)).state == {}
    assert (await reread(service, first)).state == {"own": 1, "more": 2}


SCOPES = pytest.mark.parametrize("scope", ["", "app:", "user:"], ids=["session", "app", "user"])


@SCOPES
async def test_a_dict_valued_delta_replaces_the_stored_value_whole(
    service: LedgerSessionService, scope: str
) -> None:
    key = scope + "profile"
    session = await created(service, state={key: {"name": "ada", "role": "admin"}})
    await service.append_event(session, event(delta={key: {"name": "bob"}}))
    assert session.state[key] == {"name": "bob"}
    assert (await reread(service, session)).state[key] == {"name": "bob"}


@SCOPES
async def test_a_none_valued_delta_stores_null_and_keeps_the_key(
    service: LedgerSessionService, scope: str
) -> None:
    key = scope + "flag"
    session = await created(service, state={key: True})
    await service.append_event(session, event(delta={key: None}))
    assert key in session.state and session.state[key] is None
    found = (await reread(service, session)).state
    assert key in found and found[key] is None


async def test_a_delta_leaves_the_other_keys_values_and_types_alone(
    service: LedgerSessionService,
) -> None:
    kept = {"flag": False, "zero": 0, "empty": "", "none": [], "half": 0.5}
    session = await created(service, state=kept)
    await service.append_event(session, event(delta={"new_flag": True}))
    found = (await reread(service, session)).state
    assert found == {**kept, "new_flag": True}
    assert [type(found[k]) for k in kept] == [bool, int, str, list, float]


async def test_temp_keys_are_trimmed_from_the_event_object_the_caller_passed(
    service: LedgerSessionService,
) -> None:
    session = await created(service)
    passed = event(delta={"temp:output": "from agent one", "kept": 1})
    await service.append_event(session, passed)
    assert passed.actions.state_delta == {"kept": 1}
    assert session.state["temp:output"] == "from agent one"


async def test_an_event_carrying_bytes_reads_back_byte_for_byte(
    service: LedgerSessionService,
) -> None:
    session = await created(service)
    image = types.Part.from_bytes(data=b"\x89PNG\r\n\x00\xff", mime_type="image/png")
    content = types.Content(role="user", parts=[image])
    grounding = types.GroundingMetadata(
        search_entry_point=types.SearchEntryPoint(sdk_blob=b"\x00\x01blob\xfe")
    )
    await service.append_event(
        session,
        Event(author="user", invocation_id="inv-1", content=content, grounding_metadata=grounding),
    )
    (found,) = (await reread(service, session)).events
    assert found.content == content and found.grounding_metadata == grounding


async def test_an_event_with_every_field_set_reads_back_equal(
    service: LedgerSessionService,
) -> None:
    session = await created(service)
    full = Event(
        author="planner",
        invocation_id="inv-9",
        branch="root.planner",
        content=types.Content(role="model", parts=[types.Part(text="done")]),
        turn_complete=True,
        partial=False,
        actions=EventActions(
            artifact_delta={"report.pdf": 2},
            transfer_to_agent="booker",
            escalate=True,
            skip_summarization=True,
        ),
        long_running_tool_ids={"call-1", "call-2"},
        error_code="RATE_LIMIT",
        error_message="try later",
        interrupted=True,
        grounding_metadata=types.GroundingMetadata(web_search_queries=["trains to Porto"]),
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=3, candidates_token_count=4, total_token_count=7
        ),
        citation_metadata=types.CitationMetadata(),
        custom_metadata={"trace": {"span": 12}},
        timestamp=T0 + 0.123,
        input_transcription=types.Transcription(text="heard", finished=True),
        output_transcription=types.Transcription(text="said", finished=True),
    )
    await service.append_event(session, full)
    assert await reread(service, session) == session


async def test_requested_tool_confirmations_read_back_as_tool_confirmations(
    service: LedgerSessionService,
) -> None:
    asked = {
        "call-1": ToolConfirmation(hint="book it?", confirmed=False, payload={"seat": "12A"}),
        "call-2": ToolConfirmation(hint="pay?", confirmed=True),
    }
    session = await created(service)
    await service.append_event(
        session,
        Event(
            author="booker",
            invocation_id="inv-1",
            actions=EventActions(requested_tool_confirmations=asked),
        ),
    )
    (found,) = (await reread(service, session)).events
    assert found.actions.requested_tool_confirmations == asked
    assert all(
        isinstance(c, ToolConfirmation) for c in found.actions.requested_tool_confirmations.values()
    )


@tier("driver")
async def test_of_two_writers_racing_from_one_read_one_is_taken_and_one_is_stale(
    service: LedgerSessionService,
) -> None:
    session = await created(service)
    for turn in range(4):
        current = await reread(service, session)
        copies = [current.model_copy(deep=True) for _ in range(2)]
        results = await asyncio.gather(
            *(
                service.append_event(copy, event(f"t{turn}w{i}", delta={f"t{turn}": i}))
                for i, copy in enumerate(copies)
            ),
            return_exceptions=True,
        )
        assert sorted(type(r).__name__ for r in results) == ["Event", "StaleSessionError"]
    found = await reread(service, session)
    assert len(found.events) == 4 and sorted(found.state) == ["t0", "t1", "t2", "t3"]


async def test_a_session_whose_update_time_the_caller_changed_is_still_current(
    service: LedgerSessionService,
) -> None:
    session = await created(service)
    await service.append_event(session, event("one", at=T0))
    session.last_update_time -= 0.0001  # a float's round trip, say
    await service.append_event(session, event("two", at=T0 + 1))
    assert texts(await reread(service, session)) == ["one", "two"]


async def test_get_with_after_timestamp_past_every_event_returns_none_of_them(
    service: LedgerSessionService,
) -> None:
    session = await created(service, state={"k": 1})
    for i in range(3):
        await service.append_event(session, event(f"m{i}", at=T0 + i))
    found = await reread(service, session, after_timestamp=T0 + 50)
    assert found.events == [] and found.state == {"k": 1}


@pytest.fixture
def new_york_time() -> Iterator[None]:
    """The process's local time zone is one that repeats an hour each autumn."""
    if not hasattr(time, "tzset"):
        pytest.skip("time.tzset is POSIX-only")
    before = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


async def test_events_in_a_repeated_local_hour_keep_their_exact_times_and_order(
    service: LedgerSessionService, new_york_time: None
) -> None:
    # 2024-11-03 06:00 and 06:30 UTC: 01:00 and 01:30 in New York, the second time that
    # morning; a time rebuilt from local wall-clock time alone comes back an hour early.
    repeated = [1_730_613_600.0, 1_730_615_400.0]
    session = await created(service)
    await service.append_event(session, event("before", at=repeated[0] - 1800))
    for at in repeated:
        await service.append_event(session, event(at=at))
    found = await reread(service, session)
    assert [e.timestamp for e in found.events] == [repeated[0] - 1800, *repeated]
    later = await reread(service, session, after_timestamp=repeated[0])
    assert [e.timestamp for e in later.events] == repeated


async def test_listed_sessions_last_updated_at_the_same_time_are_in_id_order(
    service: LedgerSessionService,
) -> None:
    for session_id in ("b", "c", "a"):
        session = await created(service, session_id=session_id)
        await service.append_event(session, event(at=T0))
    listed = (await service.list_sessions(app_name=APP, user_id=USER)).sessions
    assert [s.id for s in listed] == ["a", "b", "c"]


async def test_get_user_state_is_the_one_users_in_the_one_app(
    service: LedgerSessionService,
) -> None:
    session = await created(service)
    await service.append_event(session, event(delta={"user:secret": "ada's"}))
    assert await service.get_user_state(app_name=APP, user_id="bob") == {}
    assert await service.get_user_state(app_name="other app", user_id=USER) == {}
    assert await service.get_user_state(app_name=APP, user_id=USER) == {"secret": "ada's"}


async def test_get_user_state_has_each_keys_latest_value(service: LedgerSessionService) -> None:
    session = await created(service)
    for counter in (1, 2):
        await service.append_event(session, event(delta={"user:counter": counter}))
    assert await service.get_user_state(app_name=APP, user_id=USER) == {"counter": 2}
