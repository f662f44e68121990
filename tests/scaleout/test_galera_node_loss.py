"""A Galera node killed (SIGKILL) while writers append on every node, then restarted:
nothing acknowledged is lost or stored twice, nothing unacknowledged is stored, and
callers see only errors the documentation calls retryable.

Each writer appends keyed messages to one shared session through a ledger of its
node; on ``DatabaseUnavailableError`` it moves to the next node and appends the same
message again, as an application behind a balancer would (a keyed append replays
safely: a stored key returns the stored message). The writers on the surviving nodes
stall while the cluster evicts the dead node (Galera's ``evs.suspect_timeout``, 5 s by
default) and again briefly while it rejoins; the longest stalls are printed (``-s``),
never asserted on a timer."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import pairwise

import pytest
from sqlalchemy.engine import URL

from agentledger import Ledger, NewMessage, migrations
from agentledger.errors import AgentLedgerError, DatabaseUnavailableError

from .conftest import read_on_each_node
from .galera import Galera

pytestmark = [pytest.mark.slow, pytest.mark.mysql]

WRITERS_PER_NODE = 2
KILLED = 2
"""The node killed and restarted (1-based, as the keeper counts)."""
BEFORE_KILL_S = 2.0
DOWN_S = 5.0
"""How long the node stays dead before its restart begins."""
AFTER_REJOIN_S = 2.0
AFTER_EVICTION_S = 3.0
"""How long a writer on a host list goes on after the cluster evicted the dead node."""
PAUSE_S = 0.01
"""A writer's pause between appends: an agent's turn is not a tight loop. (Without it,
the six writers on the two surviving nodes, all on one session row, once made a blind
append give up after its 30 attempts, in 1 of 3 runs.)"""
KEY_TIMEOUT_S = 120
"""A writer that cannot store one message within this long gives up, failing the test."""
TIMEOUT_S = 300


@dataclass
class Writer:
    """One writer's acknowledged keys and the times of their acks, and the errors it met."""

    node: int
    acked: list[str] = field(default_factory=list)
    acks: list[tuple[float, int]] = field(default_factory=list)
    """(time.monotonic() of the ack, 0-based node that acknowledged it)."""
    errors: list[AgentLedgerError] = field(default_factory=list)
    moved: list[float] = field(default_factory=list)
    """When (time.monotonic()) it moved to the next node."""


@pytest.fixture
def restarts_killed_node(cluster: Galera) -> Iterator[None]:
    """Whatever the test does, node KILLED is Synced again for the tests after it."""
    yield
    states = cluster.command("status")["states"]
    if states[KILLED - 1] == "down":
        states = cluster.command(f"start {KILLED}")["states"]
    assert states == ["Synced"] * len(states), f"the cluster did not recover: {states}"


def write_until(stop: threading.Event, ledgers: list[Ledger], writer: Writer, name: str) -> None:
    """Append keyed messages ``name-0``, ``name-1``... until ``stop``; each message is
    appended again until acknowledged, on the next node after an unavailable one."""
    number = 0
    while not stop.is_set():
        key = f"{name}-{number}"
        deadline = time.monotonic() + KEY_TIMEOUT_S
        while True:
            message = NewMessage(role="user", content=key, external_key=key)
            try:
                ledgers[writer.node].messages.append("shared", message)
            except AgentLedgerError as error:
                writer.errors.append(error)
                if time.monotonic() > deadline or not error.retryable:
                    return
                if isinstance(error, DatabaseUnavailableError):
                    writer.node = (writer.node + 1) % len(ledgers)
                    writer.moved.append(time.monotonic())
                continue
            writer.acked.append(key)
            writer.acks.append((time.monotonic(), writer.node))
            break
        number += 1
        time.sleep(PAUSE_S)


def longest_stall(writers: list[Writer], nodes: set[int], since: float, until: float) -> float:
    """The longest time between ``since`` and ``until`` in which no node of ``nodes``
    acknowledged an append."""
    times = sorted(at for w in writers for at, node in w.acks if node in nodes)
    marks = [since, *(at for at in times if since < at < until), until]
    return max(later - earlier for earlier, later in pairwise(marks))


def while_writing(ledgers: list[Ledger], act: Callable[[], None]) -> list[Writer]:
    """Run WRITERS_PER_NODE writers per node while ``act()`` runs, then stop them."""
    writers = [Writer(node=n % len(ledgers)) for n in range(WRITERS_PER_NODE * len(ledgers))]
    stop = threading.Event()
    with ThreadPoolExecutor(len(writers)) as pool:
        running = [
            pool.submit(write_until, stop, ledgers, writer, f"w{n}")
            for n, writer in enumerate(writers)
        ]
        try:
            act()
        finally:
            stop.set()
            for done in running:
                done.result(timeout=TIMEOUT_S)
    return writers


def test_a_node_killed_and_restarted_mid_run_loses_and_duplicates_nothing(
    cluster: Galera,
    ledgers: list[Ledger],
    node_urls: list[URL],
    restarts_killed_node: None,
) -> None:
    ledgers[0].sessions.create("shared")
    moments: dict[str, float] = {}

    def kill_and_restart() -> None:
        time.sleep(BEFORE_KILL_S)
        moments["kill"] = time.monotonic()
        assert cluster.command(f"kill {KILLED}")["states"][KILLED - 1] == "down"
        time.sleep(DOWN_S)
        moments["start"] = time.monotonic()
        assert cluster.command(f"start {KILLED}")["states"][KILLED - 1] == "Synced"
        moments["synced"] = time.monotonic()
        time.sleep(AFTER_REJOIN_S)
        moments["end"] = time.monotonic()

    writers = while_writing(ledgers, kill_and_restart)

    surviving = {n for n in range(len(ledgers)) if n != KILLED - 1}
    stall = longest_stall(writers, surviving, moments["kill"], moments["start"])
    rejoin = longest_stall(writers, surviving, moments["start"], moments["end"])
    seen = Counter(
        f"{type(e).__name__}({getattr(e, 'reason', '')})" for w in writers for e in w.errors
    )
    acked = [key for writer in writers for key in writer.acked]
    moved = min((at for w in writers for at in w.moved), default=moments["end"])
    print(
        f"{len(acked)} appends acknowledged; the surviving nodes' longest stall: "
        f"{stall:.1f} s after the kill, {rejoin:.1f} s while node {KILLED} rejoined "
        f"({moments['synced'] - moments['start']:.1f} s to Synced); "
        f"the first writer left the dead node {moved - moments['kill']:.1f} s after the kill; "
        f"errors callers saw: {dict(seen)}"
    )

    assert all(error.retryable for writer in writers for error in writer.errors), seen
    assert any(isinstance(e, DatabaseUnavailableError) for w in writers for e in w.errors), (
        "no writer met the dead node: the test proved nothing"
    )
    for rows in read_on_each_node(node_urls, "SELECT seq, external_key FROM agentledger_messages"):
        assert sorted(seq for seq, _ in rows) == list(range(1, len(acked) + 1))
        assert sorted(key for _, key in rows) == sorted(acked)


def host_list(node_urls: list[URL], first: int) -> URL:
    """One URL listing every node (``?host=...&host=...``), node ``first`` (0-based)
    first: the ledger connects to the first that answers."""
    ordered = node_urls[first:] + node_urls[:first]
    hosts = tuple(f"{url.host}:{url.port}" for url in ordered)
    return node_urls[0]._replace(host=None, port=None).set(query={"host": hosts})


def test_a_ledger_on_a_host_list_keeps_writing_when_its_node_dies(
    cluster: Galera, node_urls: list[URL], restarts_killed_node: None
) -> None:
    migrations.upgrade(node_urls[0])
    with Ledger(host_list(node_urls, first=KILLED - 1)) as ledger:
        ledger.sessions.create("shared")
        writer = Writer(node=0)
        moments: dict[str, float] = {}

        def kill() -> None:
            time.sleep(BEFORE_KILL_S)
            moments["kill"] = time.monotonic()
            assert cluster.command(f"kill {KILLED}")["states"][KILLED - 1] == "down"
            time.sleep(DOWN_S + AFTER_EVICTION_S)  # the survivors stall ~5 s, then go on
            moments["end"] = time.monotonic()

        stop = threading.Event()
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(write_until, stop, [ledger], writer, "w")
            try:
                kill()
            finally:
                stop.set()
                running.result(timeout=TIMEOUT_S)
        with ledger.engine.connect() as connection:
            port = connection.exec_driver_sql("SELECT @@port").scalar()

    before = [at for at, _ in writer.acks if at < moments["kill"]]
    after = [at for at, _ in writer.acks if at > moments["kill"]]
    stall = longest_stall([writer], {0}, moments["kill"], moments["end"])
    print(
        f"{len(writer.acked)} appends acknowledged ({len(after)} after the kill), the "
        f"longest stall {stall:.1f} s; errors the caller saw: "
        f"{[type(error).__name__ for error in writer.errors]}"
    )
    assert before, "the writer did not write before the kill"
    assert len(after) >= 10, "the writer did not go on writing after the kill"
    assert port != node_urls[KILLED - 1].port  # it moved to a node that answers
    assert all(error.retryable for error in writer.errors)
    survivors = [url for n, url in enumerate(node_urls) if n != KILLED - 1]
    for rows in read_on_each_node(survivors, "SELECT seq, external_key FROM agentledger_messages"):
        assert sorted(seq for seq, _ in rows) == list(range(1, len(writer.acked) + 1))
        assert sorted(key for _, key in rows) == sorted(writer.acked)
