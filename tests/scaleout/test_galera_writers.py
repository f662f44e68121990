"""Writers spread over the three nodes of a Galera cluster (multi-primary, as a
round-robin balancer would spread them): what the documentation says never conflicts
does not conflict there either (a certification failure at COMMIT is retried with the
cluster's budget), nothing acknowledged is lost or stored twice, creators of one id
take turns without a lock that can leak, and a read or a revision-checked write on one
node sees a write acknowledged on another."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import URL

from agentledger import (
    AsyncLedger,
    CheckpointPayload,
    Ledger,
    NewMessage,
    NewStep,
    RetryPolicy,
    TokenUsage,
    migrations,
)
from agentledger.errors import AgentLedgerError

from .conftest import read_on_each_node

pytestmark = [pytest.mark.slow, pytest.mark.mysql]

WRITERS = 8
TURNS = 15
TIMEOUT_S = 300


def on_every_node(ledgers: list[Ledger], write: Callable[[Ledger, int, int], Any]) -> list[str]:
    """``write(ledger, writer, turn)`` by WRITERS threads, writer i on node i mod 3, all
    released at once; the errors they met, as ``Class(reason)`` strings."""
    start = threading.Barrier(WRITERS)
    errors: list[str] = []

    def writer(number: int) -> None:
        ledger = ledgers[number % len(ledgers)]
        start.wait()
        for turn in range(TURNS):
            try:
                write(ledger, number, turn)
            except AgentLedgerError as error:
                reason = getattr(error, "reason", "") or error
                errors.append(f"{type(error).__name__}({reason})")

    with ThreadPoolExecutor(WRITERS) as pool:
        for done in [pool.submit(writer, number) for number in range(WRITERS)]:
            done.result(timeout=TIMEOUT_S)
    return errors


def test_blind_appends_and_steps_from_every_node_never_conflict_and_all_are_stored(
    ledgers: list[Ledger], node_urls: list[URL]
) -> None:
    ledgers[0].sessions.create("busy")
    usage = TokenUsage(input_tokens=1, output_tokens=1, total_tokens=2)

    def write(ledger: Ledger, writer: int, turn: int) -> None:
        ledger.messages.append("busy", NewMessage(role="user", content=f"{writer}-{turn}"))
        ledger.steps.append("busy", NewStep(kind="model", model=f"{writer}-{turn}", usage=usage))

    assert on_every_node(ledgers, write) == []
    expected = WRITERS * TURNS
    for messages, steps in zip(
        read_on_each_node(node_urls, "SELECT seq, content FROM agentledger_messages"),
        read_on_each_node(node_urls, "SELECT seq FROM agentledger_steps"),
        strict=True,
    ):
        assert sorted(seq for seq, _ in messages) == list(range(1, expected + 1))
        assert len({content for _, content in messages}) == expected
        assert sorted(seq for (seq,) in steps) == list(range(1, expected + 1))


def test_state_merges_and_checkpoints_without_a_parent_from_every_node_never_conflict(
    ledgers: list[Ledger], node_urls: list[URL]
) -> None:
    ledgers[0].sessions.create("resumable", app_name="app")

    def write(ledger: Ledger, writer: int, turn: int) -> None:
        ledger.app_state.merge("app", {"set": {f"writer-{writer}": turn}})
        ledger.checkpoints.save("resumable", CheckpointPayload(runtime_state={"turn": turn}))

    assert on_every_node(ledgers, write) == []
    assert ledgers[1].app_state.get("app").state == {
        f"writer-{n}": TURNS - 1 for n in range(WRITERS)
    }
    (count,) = read_on_each_node(node_urls, "SELECT COUNT(*) FROM agentledger_checkpoints")[2]
    assert count == (WRITERS * TURNS,)


def test_creators_of_one_id_on_every_node_make_it_once_and_all_find_it(
    ledgers: list[Ledger],
) -> None:
    outcomes: list[bool] = []

    def write(ledger: Ledger, writer: int, turn: int) -> None:
        _, created = ledger.sessions.get_or_create(f"race-{turn}")
        outcomes.append(created)

    assert on_every_node(ledgers, write) == []
    assert outcomes.count(True) == TURNS
    assert len(outcomes) == WRITERS * TURNS


def test_a_read_on_one_node_sees_what_another_node_acknowledged(ledgers: list[Ledger]) -> None:
    writer, reader = ledgers[0], ledgers[1]
    writer.sessions.create("read-your-writes")
    for turn in range(50):
        writer.messages.append("read-your-writes", NewMessage(role="user", content=str(turn)))
        assert [m.content for m in reader.messages.last("read-your-writes", 1)] == [str(turn)]


def test_a_save_on_one_node_finds_the_revision_another_node_acknowledged(
    node_urls: list[URL],
) -> None:
    """Each save is the first statement of its transaction, an UPDATE checked against
    the record's revision; on a node still applying the previous save it would match
    no row (a stale conflict) or be aborted by the applier. No retry is allowed, so
    either fails the test (with ``wsrep_sync_wait = 1``, 21 of 1,000 did)."""
    migrations.upgrade(node_urls[0])
    once = RetryPolicy(attempts=1)
    with Ledger(node_urls[0], retry=once) as first, Ledger(node_urls[1], retry=once) as second:
        record = first.sessions.create("alternating", state={"turn": 0})
        for turn in range(1, 201):
            ledger = second if turn % 2 else first
            record = ledger.sessions.save(record.model_copy(update={"state": {"turn": turn}}))
        assert (record.revision, first.sessions.get("alternating").state) == (201, {"turn": 200})


def _sync_wait(ledger: Ledger) -> object:
    with ledger.engine.connect() as connection:
        return connection.execute(text("SELECT @@session.wsrep_sync_wait")).scalar()


def test_a_ledger_waits_for_the_cluster_before_each_transaction_unless_told_not_to(
    node_urls: list[URL],
) -> None:
    with Ledger(node_urls[0]) as waiting, Ledger(node_urls[0], read_your_writes=False) as not_:
        assert (_sync_wait(waiting), _sync_wait(not_)) == (15, 0)


async def test_an_async_ledger_waits_for_the_cluster_before_each_transaction(
    node_urls: list[URL],
) -> None:
    async with AsyncLedger(node_urls[1]) as ledger, ledger.engine.connect() as connection:
        assert (await connection.execute(text("SELECT @@session.wsrep_sync_wait"))).scalar() == 15
