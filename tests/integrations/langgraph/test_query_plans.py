"""A long thread's reads stop at the rows they return: the latest checkpoint and a
page of ``list`` (in one namespace or across them) read that many checkpoints however
long the thread. Checked in the plans the server ran: PostgreSQL's EXPLAIN ANALYZE and
MariaDB's ANALYZE of the statements the saver sent, rows counted per plan node."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_config
from sqlalchemy import event

from agentledger import Ledger
from agentledger.integrations.langgraph import LedgerSaver

from ...databases import empty_tables, migrated_once

LENGTH = 300
CHECKPOINTS = "agentledger_langgraph_checkpoints"
ANALYZE = {
    "postgresql": ("EXPLAIN (ANALYZE, FORMAT JSON) ", "Relation Name", "Actual Rows"),
    "mysql": ("ANALYZE FORMAT=JSON ", "table_name", "r_rows"),
}
"""Per dialect: the prefix that runs a statement and reports its plan as JSON, the key
naming a plan node's table, and the key of the rows that node read."""


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("postgresql", marks=pytest.mark.postgresql),
        pytest.param("mysql", marks=pytest.mark.mysql),
    ],
)
def long_thread(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LedgerSaver]:
    base = migrated_once(request.param, tmp_path_factory)
    ledger = Ledger(base)
    saver = LedgerSaver(ledger)
    config = generate_config("long")
    for step in range(LENGTH):
        checkpoint = generate_checkpoint(
            channel_values={"v": step}, channel_versions={"v": step + 1}
        )
        config = saver.put(config, checkpoint, {"step": step}, {"v": step + 1})
    # Statistics as a server keeps them for a table of long threads (autovacuum's
    # ANALYZE): left from earlier tests' short threads, they say a sort is as cheap.
    with ledger.engine.begin() as connection:
        table = CHECKPOINTS if request.param == "postgresql" else f"TABLE {CHECKPOINTS}"
        connection.exec_driver_sql(f"ANALYZE {table}")
    try:
        yield saver
    finally:
        ledger.close()
        empty_tables(base)


def _checkpoint_rows_read(saver: LedgerSaver, call: Callable[[], Any]) -> int:
    """The most rows any plan node read from the checkpoints table while ``call`` ran."""
    sent: list[tuple[str, Any]] = []

    def record(_c: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        sent.append((statement, parameters))

    engine = saver.ledger.engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        call()
    finally:
        event.remove(engine, "before_cursor_execute", record)
    reads = [(sql, params) for sql, params in sent if CHECKPOINTS in sql]
    assert reads, "the call sent no statement reading the checkpoints"
    prefix, table_key, rows_key = ANALYZE[engine.dialect.name]
    most = 0
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        for sql, params in reads:
            cursor.execute(prefix + sql, params)
            document = cursor.fetchone()[0]
            plan = json.loads(document) if isinstance(document, str) else document
            most = max(most, _most_rows(plan, table_key, rows_key))
        raw.rollback()
    finally:
        raw.close()
    return most


def _most_rows(node: Any, table_key: str, rows_key: str) -> int:
    """The most rows a node of the plan ``node`` read from the checkpoints table."""
    if isinstance(node, list):
        return max([0, *(_most_rows(item, table_key, rows_key) for item in node)])
    if not isinstance(node, dict):
        return 0
    here = int(node.get(rows_key) or 0) if node.get(table_key) == CHECKPOINTS else 0
    return max([here, *(_most_rows(value, table_key, rows_key) for value in node.values())])


def test_the_latest_checkpoint_of_a_long_thread_reads_one_checkpoint(
    long_thread: LedgerSaver,
) -> None:
    config = generate_config("long")
    assert _checkpoint_rows_read(long_thread, lambda: long_thread.get_tuple(config)) == 1


def test_a_page_of_a_long_threads_namespace_reads_only_that_page(
    long_thread: LedgerSaver,
) -> None:
    config = generate_config("long")

    def page() -> None:
        assert len(list(long_thread.list(config, limit=10))) == 10

    assert _checkpoint_rows_read(long_thread, page) <= 10


def test_a_page_across_a_long_threads_namespaces_reads_only_that_page(
    long_thread: LedgerSaver,
) -> None:
    config = {"configurable": {"thread_id": "long"}}

    def page() -> None:
        assert len(list(long_thread.list(config, limit=10))) == 10  # type: ignore[arg-type]

    assert _checkpoint_rows_read(long_thread, page) <= 10
