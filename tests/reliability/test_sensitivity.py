"""The control experiment: with the revision check switched off (test-only), the same
read-modify-save workload loses updates, so the no-lost-update tests can fail."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session

from agentledger import Ledger
from agentledger.records import SessionRecord
from agentledger.repositories import sessions as sessions_module

from ..databases import dialect_params, migrated_database
from . import summary

WRITERS, ROUNDS = 8, 50


@pytest.fixture(params=dialect_params())
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[URL]:
    with migrated_database(request.param, tmp_path) as url:
        yield url


def read_modify_save(ledger: Ledger) -> int:
    """The workload of the no-lost-update test: returns the conflicts met."""
    conflicts = 0
    for _ in range(ROUNDS):
        while True:
            record = ledger.sessions.get("counter")
            state = {"total": record.state["total"] + 1}
            try:
                ledger.sessions.save(record.model_copy(update={"state": state}))
                break
            except Exception:
                conflicts += 1
    return conflicts


def run_workload(url: URL) -> tuple[int, int]:
    with Ledger(url) as ledger:
        ledger.sessions.create("counter", state={"total": 0})
        with ThreadPoolExecutor(WRITERS) as pool:
            conflicts = sum(pool.map(lambda _: read_modify_save(ledger), range(WRITERS)))
        return ledger.sessions.get("counter").state["total"], conflicts


def test_with_the_revision_check_the_workload_loses_nothing(database: URL) -> None:
    total, conflicts = run_workload(database)
    assert total == WRITERS * ROUNDS
    assert conflicts > 0
    summary.add(
        f"{database.get_backend_name()} no-lost-update",
        writers=WRITERS,
        commits=total,
        conflicts=conflicts,
        lost=WRITERS * ROUNDS - total,
    )


def test_without_the_revision_check_the_same_workload_loses_updates(
    database: URL, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked = sessions_module.write_versioned

    def unchecked(session: Session, record: SessionRecord, values: dict[str, Any]) -> object:
        # Expect whatever revision is stored now (read under the row lock): the version
        # predicate always matches, as if there were none.
        current = sessions_module.load_record(session, record.id, lock="update")
        stale = record.model_copy(update={"revision": current.revision})
        return checked(session, stale, values)

    monkeypatch.setattr(sessions_module, "write_versioned", unchecked)
    total, conflicts = run_workload(database)
    assert conflicts == 0
    assert total < WRITERS * ROUNDS, "the control lost nothing: the workload has no contention"
    summary.add(
        f"{database.get_backend_name()} control without revision check",
        lost=WRITERS * ROUNDS - total,
    )
