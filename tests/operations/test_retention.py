"""Purge: a dry run changes nothing, and the purge removes exactly what it listed."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import URL

from agentledger import Ledger, ValidationError, migrations
from agentledger.retention import PurgeItem, PurgePolicy

from ..databases import dialect_params, migrated_database
from ._data import Clock, Snapshot, ledger_at, snapshot

DAY = timedelta(days=1)


def _fill(ledger: Ledger, clock: Clock) -> None:
    """Old sessions (two users), then 40 days later fresh ones with checkpoints, some
    expiring after an hour; then two hours pass."""
    for id, user in (("old-1", "ann"), ("old-2", "ann"), ("old-3", "bob")):
        ledger.sessions.create(id, user_id=user, title=f"title of {id}")
        ledger.messages.append(id, [{"role": "user", "content": "hi"}])
        ledger.steps.append(id, [{"kind": "model"}, {"kind": "tool"}])
        ledger.grants.grant(id, "tool:x")
        with ledger.unit_of_work() as uow:
            uow.checkpoints.save(id, {"runtime_state": {"id": id}})
    clock.now += 40 * DAY
    for id, user, ttls in (
        ("fresh-1", "ann", [None, 1, None, None, 1, None]),
        ("fresh-2", "bob", [1, None, None]),
        ("fresh-3", "bob", [None]),
    ):
        ledger.sessions.create(id, user_id=user)
        with ledger.unit_of_work() as uow:
            for hours in ttls:
                ttl = None if hours is None else timedelta(hours=hours)
                uow.checkpoints.save(id, {"runtime_state": {"at": str(clock.now)}}, ttl=ttl)
    clock.now += timedelta(hours=2)


@pytest.fixture(params=dialect_params())
def filled(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    with migrated_database(request.param, tmp_path) as url:
        clock = Clock()
        with ledger_at(url, clock) as ledger:
            _fill(ledger, clock)
        yield url, clock


def _after(before: Snapshot, items: list[PurgeItem]) -> Snapshot:
    """``before`` without the listed sessions (and all their rows) and checkpoints; the
    latest-checkpoint pointer is checked on its own."""
    gone = {item.id for item in items if item.kind == "session"}
    refs = {item.id for item in items if item.kind == "checkpoint"}
    result: Snapshot = {}
    for table, rows in before.items():
        key = "id" if table == "agentledger_sessions" else "session_id"
        kept = [row for row in rows if row[key] not in gone and row.get("ref") not in refs]
        if table == "agentledger_sessions":
            kept = [{**row, "latest_checkpoint_ref": None} for row in kept]
        result[table] = kept
    return result


def _without_pointer(data: Snapshot) -> Snapshot:
    return {
        **data,
        "agentledger_sessions": [
            {**row, "latest_checkpoint_ref": None} for row in data["agentledger_sessions"]
        ],
    }


def _pointers_name_the_newest(data: Snapshot) -> None:
    for row in data["agentledger_sessions"]:
        mine = [c for c in data["agentledger_checkpoints"] if c["session_id"] == row["id"]]
        newest = max(mine, key=lambda c: c["seq"])["ref"] if mine else None
        assert row["latest_checkpoint_ref"] == newest, row["id"]


POLICIES: dict[str, dict[str, Any]] = {
    "older-than": {"older_than": 30 * DAY},
    "expired": {"expired_checkpoints": True},
    "keep-2": {"keep_checkpoints": 2},
    "keep-0": {"keep_checkpoints": 0},
    "everything": {"older_than": 30 * DAY, "expired_checkpoints": True, "keep_checkpoints": 1},
    "one-user": {"older_than": 30 * DAY, "keep_checkpoints": 1, "user_id": "bob"},
}


@pytest.mark.parametrize("policy", POLICIES.values(), ids=POLICIES.keys())
def test_a_dry_run_changes_nothing_and_purge_removes_exactly_what_it_listed(
    filled: tuple[URL, Clock], policy: dict[str, Any]
) -> None:
    url, clock = filled
    before = snapshot(url)
    planned: list[PurgeItem] = []
    deleted: list[PurgeItem] = []

    with ledger_at(url, clock) as ledger:
        plan = ledger.retention.plan_purge(PurgePolicy(**policy), on_item=planned.append, batch=2)
        assert snapshot(url) == before
        done = ledger.retention.purge(PurgePolicy(**policy), on_item=deleted.append, batch=2)

    assert planned and deleted == planned
    assert (done.sessions, done.checkpoints) == (plan.sessions, plan.checkpoints)
    assert not plan.applied and done.applied
    after = snapshot(url)
    assert _without_pointer(after) == _after(before, planned)
    _pointers_name_the_newest(after)


def test_the_items_say_what_goes_and_why(filled: tuple[URL, Clock]) -> None:
    url, clock = filled
    items: list[PurgeItem] = []
    with ledger_at(url, clock) as ledger:
        policy = PurgePolicy(older_than=30 * DAY, keep_checkpoints=2)
        report = ledger.retention.plan_purge(policy, on_item=items.append)

    sessions = [(i.id, i.title, i.messages, i.steps) for i in items if i.kind == "session"]
    assert sessions == [
        ("old-1", "title of old-1", 1, 2),
        ("old-2", "title of old-2", 1, 2),
        ("old-3", "title of old-3", 1, 2),
    ]
    checkpoints = [(i.session_id, i.seq, i.reason) for i in items if i.kind == "checkpoint"]
    # fresh-1: seqs 2 and 5 expired; the newest two unexpired are 6 and 4.
    # fresh-2: seq 1 expired; 2 and 3 are the newest two.
    assert checkpoints == [
        ("fresh-1", 1, "beyond_keep"),
        ("fresh-1", 2, "expired"),
        ("fresh-1", 3, "beyond_keep"),
        ("fresh-1", 5, "expired"),
        ("fresh-2", 1, "expired"),
    ]
    assert (report.sessions, report.checkpoints, report.messages, report.steps) == (3, 5, 3, 6)
    assert report.cutoff == report.now - 30 * DAY


def test_a_policy_without_a_rule_is_refused() -> None:
    with pytest.raises(ValidationError, match="nothing to purge"):
        PurgePolicy()


@pytest.mark.parametrize(
    "bad",
    [{"older_than": timedelta(0)}, {"keep_checkpoints": -1}, {"keep_checkpoints": True}],
)
def test_bad_rules_are_refused_naming_the_option(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as refused:
        PurgePolicy(**bad)
    assert refused.value.path == next(iter(bad))


def test_a_purge_needs_a_policy(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    migrations.upgrade(url)
    with ledger_at(url) as ledger, pytest.raises(ValidationError, match="PurgePolicy"):
        ledger.retention.purge({"older_than": DAY})  # type: ignore[arg-type]


@pytest.mark.sqlite
def test_after_a_large_purge_vacuum_gives_sqlite_space_back(tmp_path: Path) -> None:
    path = tmp_path / "big.db"
    url = f"sqlite:///{path}"
    migrations.upgrade(url)
    clock = Clock()
    with ledger_at(url, clock) as ledger:
        for index in range(20):
            id = f"s{index}"
            ledger.sessions.create(id)
            ledger.steps.append(id, [{"kind": "model", "input": "x" * 2000}] * 200)
        clock.now += 40 * DAY
        report = ledger.retention.purge(PurgePolicy(older_than=30 * DAY))
        sizes = ledger.retention.sqlite_sizes()
        done = ledger.retention.vacuum()

    assert report.sessions == 20
    assert report.sqlite_free_bytes is not None and report.sqlite_free_bytes > 5 * 2**20
    assert sizes is not None and sizes[1] == report.sqlite_free_bytes
    assert done.after < done.before - 5 * 2**20
    assert os.path.getsize(path) == done.after


@pytest.mark.sqlite
def test_memories_are_found_by_their_words_after_a_vacuum(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'words.db'}"
    migrations.upgrade(url)
    with ledger_at(url) as ledger:
        for index in range(300):
            ledger.memory.put(("notes",), f"n{index}", {}, text=f"note{index} pasta")
        for index in range(0, 300, 2):
            ledger.memory.delete(("notes",), f"n{index}")
        ledger.retention.vacuum()
        found = ledger.memory.search(("notes",), words="note299 note1", limit=10)
        every = ledger.memory.search(("notes",), words="pasta", limit=500)

    assert sorted(item.key for item in found) == ["n1", "n299"]
    assert len(every) == 150


@pytest.mark.parametrize("dialect", dialect_params("postgresql", "mysql"))
def test_vacuum_is_only_for_sqlite(tmp_path: Path, dialect: str) -> None:
    with (
        migrated_database(dialect, tmp_path) as url,
        ledger_at(url) as ledger,
        pytest.raises(ValidationError, match="SQLite"),
    ):
        ledger.retention.vacuum()
