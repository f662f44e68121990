"""Copy between databases: constant memory over 100,000 steps, and an interrupted copy
run again ends with exactly one copy of every row."""

from __future__ import annotations

import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, insert
from sqlalchemy.pool import NullPool

from agentledger import (
    AgentSession,
    AgentStep,
    CorruptRecordError,
    SessionSelection,
    ValidationError,
    migrations,
)
from agentledger.transfer import Progress

from ..databases import dialect_params, scratch_database
from ._data import counts, ledger_at, populate, snapshot

FEW_STEPS = 4_000
MANY_STEPS = 20_000
SESSIONS = 10
PEAK_BOUND = 16 * 1024 * 1024
"""Holding steps as dicts takes over 1 KiB each (20,000: over 20 MiB); streaming them
in batches of 1,000 takes about 5 MiB whatever their number."""


def _bulk_source(url: str, steps: int) -> None:
    """SESSIONS sessions of ``steps`` / SESSIONS steps each, inserted directly (fast)."""
    at = datetime(2026, 1, 1, tzinfo=UTC)
    per = steps // SESSIONS
    engine = create_engine(url, poolclass=NullPool)
    with engine.begin() as connection:
        for index in range(SESSIONS):
            id = f"bulk-{index:02d}"
            connection.execute(
                insert(AgentSession.__table__),
                {
                    "id": id,
                    "status": "active",
                    "state": {},
                    "message_count": 0,
                    "message_seq": 0,
                    "step_count": per,
                    "checkpoint_seq": 0,
                    "input_tokens": per,
                    "output_tokens": 0,
                    "total_tokens": per,
                    "created_at": at,
                    "updated_at": at,
                    "revision": 1,
                },
            )
            connection.execute(
                insert(AgentStep.__table__),
                [
                    {
                        "session_id": id,
                        "seq": seq,
                        "step_index": seq,
                        "kind": "model",
                        "model": "m",
                        "input": {"i": seq},
                        "output": None,
                        "tool_calls": None,
                        "input_tokens": 1,
                        "output_tokens": 0,
                        "total_tokens": 1,
                        "usage_extra": None,
                        "started_at": at + timedelta(microseconds=seq),
                        "ended_at": None,
                        "error": None,
                    }
                    for seq in range(1, per + 1)
                ],
            )
    engine.dispose()


def _copy_peak(folder: Path, steps: int) -> int:
    """The most memory (traced) a copy of ``steps`` steps between two SQLite files held."""
    folder.mkdir()
    source = f"sqlite:///{folder / 'source.db'}"
    target = f"sqlite:///{folder / 'target.db'}"
    migrations.upgrade(source)
    migrations.upgrade(target)
    _bulk_source(source, steps)

    with ledger_at(source) as reader, ledger_at(target) as writer:
        tracemalloc.start()
        started = time.perf_counter()
        try:
            report = reader.transfer.copy_to(writer)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        took = time.perf_counter() - started

    print(f"copy of {steps:,} steps: peak {peak / 2**20:.1f} MiB (traced), {took:.1f} s")
    assert report.tables["steps"].inserted == steps
    assert counts(snapshot(target))["agentledger_steps"] == steps
    return peak


@pytest.mark.sqlite
@pytest.mark.slow
def test_copying_five_times_the_steps_takes_no_more_memory(tmp_path: Path) -> None:
    few = _copy_peak(tmp_path / "few", FEW_STEPS)
    many = _copy_peak(tmp_path / "many", MANY_STEPS)

    assert many < PEAK_BOUND, f"peak {many / 2**20:.1f} MiB"
    # Held in memory, five times the steps would take about five times as much.
    assert many < few * 1.5, f"{few / 2**20:.1f} MiB -> {many / 2**20:.1f} MiB"


class Interrupt(Exception):
    """Stands in for a crash, a lost connection, a Ctrl-C."""


def _stop_after(batches: int) -> object:
    seen = 0

    def progress(_progress: Progress) -> None:
        nonlocal seen
        seen += 1
        if seen == batches:
            raise Interrupt

    return progress


@pytest.fixture
def many(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'many.db'}"
    migrations.upgrade(url)
    with ledger_at(url) as ledger:
        for round in range(4):
            populate(ledger, prefix=f"r{round}")
    return url


@pytest.mark.parametrize("dialect", dialect_params())
def test_an_interrupted_copy_by_pages_run_again_ends_with_one_copy_of_every_row(
    many: str, tmp_path: Path, dialect: str
) -> None:
    expected = snapshot(many)
    with scratch_database(dialect, str(tmp_path)) as target:
        migrations.upgrade(target)
        with ledger_at(many) as source, ledger_at(target) as writer:
            with pytest.raises(Interrupt):
                source.transfer.copy_to(writer, batch=2, progress=_stop_after(25), commit="page")
            partial = counts(snapshot(target))
            again = source.transfer.copy_to(writer, batch=2, commit="page")

        assert 0 < partial["agentledger_sessions"] < len(expected["agentledger_sessions"])
        assert snapshot(target) == expected
    assert again.conflict_count == 0
    assert again.tables["sessions"].unchanged == partial["agentledger_sessions"]
    assert again.inserted + sum(c.unchanged for c in again.tables.values()) == sum(
        len(rows) for rows in expected.values()
    )


@pytest.mark.parametrize("stop", [1, 3, 8, 20])
def test_a_copy_interrupted_anywhere_completes_on_the_next_run(
    many: str, tmp_path: Path, stop: int
) -> None:
    target = f"sqlite:///{tmp_path / 'target.db'}"
    migrations.upgrade(target)
    with ledger_at(many) as source, ledger_at(target) as writer:
        with pytest.raises(Interrupt):
            source.transfer.copy_to(writer, batch=3, progress=_stop_after(stop))
        source.transfer.copy_to(writer, batch=3)

    assert snapshot(target) == snapshot(many)


@pytest.mark.parametrize("dialect", dialect_params("postgresql", "mysql"))
def test_a_copy_from_sqlite_to_a_server_and_back_keeps_every_value(
    many: str, tmp_path: Path, dialect: str
) -> None:
    back = f"sqlite:///{tmp_path / 'back.db'}"
    migrations.upgrade(back)
    with scratch_database(dialect, str(tmp_path)) as server:
        migrations.upgrade(server)
        with ledger_at(many) as a, ledger_at(server) as b, ledger_at(back) as c:
            a.transfer.copy_to(b)
            b.transfer.copy_to(c)
        assert snapshot(server) == snapshot(many)
    assert snapshot(back) == snapshot(many)


def test_copy_of_a_selection_carries_only_those_sessions(many: str, tmp_path: Path) -> None:
    target = f"sqlite:///{tmp_path / 'target.db'}"
    migrations.upgrade(target)
    with ledger_at(many) as source, ledger_at(target) as writer:
        report = source.transfer.copy_to(writer, selection=SessionSelection(user_id="user-1"))

    stored = snapshot(target)
    assert report.tables["sessions"].inserted == 4
    assert {row["user_id"] for row in stored["agentledger_sessions"]} == {"user-1"}
    assert len(stored["agentledger_checkpoints"]) == 12


@pytest.mark.parametrize(
    ("stored", "error", "message"),
    [
        ("NaN", ValidationError, "source agentledger_messages row \\('bad', 1\\)"),
        ("{not json", CorruptRecordError, "agentledger_messages row \\('bad', 1\\)"),
    ],
)
def test_a_corrupt_source_row_stops_the_copy_naming_it(
    tmp_path: Path, stored: str, error: type[Exception], message: str
) -> None:
    source = f"sqlite:///{tmp_path / 'source.db'}"
    target = f"sqlite:///{tmp_path / 'target.db'}"
    migrations.upgrade(source)
    migrations.upgrade(target)
    with ledger_at(source) as ledger:
        ledger.sessions.create("bad")
        ledger.messages.append("bad", {"role": "user", "content": "fine"})
    engine = create_engine(source, poolclass=NullPool)
    with engine.begin() as connection:  # written by something other than agentledger
        connection.exec_driver_sql("UPDATE agentledger_messages SET content = ?", (stored,))
    engine.dispose()

    with ledger_at(source) as a, ledger_at(target) as b, pytest.raises(error, match=message):
        a.transfer.copy_to(b)

    assert counts(snapshot(target))["agentledger_sessions"] == 0
