"""Savers in separate processes writing one thread at once, half through the sync saver
and half through the async one: every acknowledged checkpoint and write is stored, each
on the parent its writer gave, and the thread is one session, although every writer
starts on a thread that does not exist yet."""

from __future__ import annotations

import multiprocessing
from typing import Any

import pytest
from langgraph.checkpoint.conformance.test_utils import generate_config
from sqlalchemy.engine import URL

from agentledger import Ledger
from agentledger.integrations.langgraph import LedgerSaver

from ...backends import BACKENDS
from ...databases import dialect_params, empty_tables, migrated_once
from ._writer import THREAD, task_id, write_in_process

WRITERS = 8
STEPS = 10
"""8 writers of 10 checkpoints, each with a write: the 160 acknowledged writes of the run
in which LangGraph's own savers lost 102 to 139."""


def _url(base: URL, dialect: str, mode: str) -> str:
    """``base`` with the driver agentledger's contract backends use for ``mode``."""
    backend = next(
        b
        for b in BACKENDS
        if b.dialect == dialect and b.contract and b.multiprocess and mode in b.modes
    )
    return backend.url_for(base, mode).render_as_string(hide_password=False)


def _run_writers(base: URL, dialect: str) -> dict[str, list[str]]:
    """Each writer's acknowledged checkpoint ids, in the order it stored them."""
    fork = multiprocessing.get_context("fork")
    barrier, results = fork.Barrier(WRITERS), fork.Queue()
    writers = []
    for index in range(WRITERS):
        mode = ("sync", "async")[index % 2]
        arguments = (_url(base, dialect, mode), mode, f"w{index}", STEPS, barrier, results)
        writers.append(fork.Process(target=write_in_process, args=arguments))
    for writer in writers:
        writer.start()
    outcomes = [results.get(timeout=300) for _ in writers]
    for writer in writers:
        writer.join(timeout=60)
    assert all(isinstance(outcome, tuple) for outcome in outcomes), outcomes
    assert [writer.exitcode for writer in writers] == [0] * WRITERS
    return dict(outcomes)


@pytest.mark.slow
@pytest.mark.parametrize("dialect", dialect_params())
def test_savers_in_separate_processes_keep_every_acknowledged_checkpoint_and_write(
    dialect: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    base = migrated_once(dialect, tmp_path_factory)
    try:
        acknowledged = _run_writers(base, dialect)
        with Ledger(base) as ledger:
            listed = list(LedgerSaver(ledger).list(generate_config(THREAD)))
            sessions = ledger.sessions.list(app_name="langgraph").items
    finally:
        empty_tables(base)

    stored: dict[str, Any] = {item.config["configurable"]["checkpoint_id"]: item for item in listed}
    assert len(listed) == len(stored) == WRITERS * STEPS
    assert set(stored) == {id_ for ids in acknowledged.values() for id_ in ids}
    for name, ids in acknowledged.items():
        parents = [stored[id_].parent_config for id_ in ids]
        assert parents[0] is None
        assert [p["configurable"]["checkpoint_id"] for p in parents[1:]] == ids[:-1]
        writes = [stored[id_].pending_writes for id_ in ids]
        assert writes == [[(task_id(name, step), name, step)] for step in range(STEPS)]
    assert len(sessions) == 1
