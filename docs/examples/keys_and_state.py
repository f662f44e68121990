from datetime import UTC, datetime

from agentledger import Ledger, NewMessage, NewStep

with Ledger.in_memory() as ledger:
    # A session found by the caller's key, unique within (app_name, user_id): any text
    # up to 1,024 characters; two users may each have a session with the same key.
    scope = {"app_name": "travel agent", "user_id": "ada@example.com"}
    session, created = ledger.sessions.get_or_create_by_key("thread-42", **scope)
    assert ledger.sessions.get_by_key("thread-42", **scope).id == session.id

    # One event: a message with its own time and key, a session state delta and the
    # app's and user's state deltas, as one revision step.
    event = NewMessage(
        role="planner_agent",
        content={"text": "Booked the 9:40 train"},
        created_at=datetime(2026, 5, 1, 9, 40, tzinfo=UTC),
        external_key="event-7",
    )
    done = ledger.messages.append(
        session,
        event,
        state_delta={"set": {"booked": True}, "delete": ["draft"]},
        app_state_delta={"set": {"bookings_today": 12}},
        user_state_delta={"set": {"home": "Porto"}},
    )
    assert done.session.revision == session.revision + 1
    assert [m.seq for m in done.messages] == [1]

    # A retry after a commit whose outcome was unknown returns the stored rows (its
    # record is stale by now, but the key is checked first); other content under a
    # stored key raises ConflictError(reason="duplicate").
    again = ledger.messages.append(session, event)
    assert again.messages == done.messages and again.session == done.session

    # Reads by time (inclusive since, exclusive before, optionally the last n) and
    # removing the newest messages.
    assert ledger.messages.since(session.id, datetime(2026, 5, 1, tzinfo=UTC), last=10)
    popped = ledger.messages.pop(done.session)
    assert popped.messages == done.messages and popped.session.message_count == 0

    # App and user state: read (empty at revision 0 until written), merge a delta
    # under the row lock (never conflicts), or save a record (checks its revision).
    assert ledger.app_state.get("travel agent").state == {"bookings_today": 12}
    user = ledger.user_state.merge("travel agent", "ada@example.com", {"set": {"seat": "window"}})
    assert user.state == {"home": "Porto", "seat": "window"} and user.revision == 2

    # Steps under a key are idempotent too, and are found by run and by kind.
    call = NewStep(kind="tool", name="book_train", run_id="run-1", external_key="call-1")
    ledger.steps.append(session.id, [call, NewStep(kind="model", run_id="run-1")])
    ledger.steps.append(session.id, call)
    assert [s.seq for s in ledger.steps.by_run(session.id, "run-1")] == [1, 2]
    assert [s.name for s in ledger.steps.by_kind(session.id, "tool")] == ["book_train"]

    # A scope's sessions with their keys and state, in the listing's one query.
    (item,) = ledger.sessions.list(**scope, include=["external_key", "state"]).items
    assert (item.external_key, item.state) == ("thread-42", {"booked": True})

    # One consistent snapshot of several reads; a write in it raises UsageError.
    with ledger.unit_of_work(readonly=True) as uow:
        current = uow.sessions.get(session.id)
        conversation = uow.messages.since(session.id, datetime(2026, 5, 1, tzinfo=UTC))
        home = uow.user_state.get("travel agent", "ada@example.com").state["home"]
    print(current.revision, len(conversation), home)
