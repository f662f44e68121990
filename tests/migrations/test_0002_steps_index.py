"""Revision 0002 (the steps index): frozen 0001, rows kept both ways, the plan it fixes."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, event, inspect, select
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from agentledger import Ledger, migrations
from agentledger.engine import create_sync_engine
from agentledger.models import AgentCheckpoint, AgentGrant, AgentStep, metadata

from ..databases import scratch_database
from ._support import drift, new_message, new_session

INDEX = "ix_agentledger_steps_started_at_model"
FROZEN = {
    # A released revision never changes: ship a new one instead. When a revision
    # stops being the head, add its hash here.
    "agentledger_0001": "51c4b3648282548aae96501ce7eb1ac03bc4605f075a9408e6942749cdc37df4",
}
AT = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


def test_every_revision_but_the_head_is_frozen() -> None:
    script = ScriptDirectory.from_config(migrations.alembic_config())
    for revision in script.walk_revisions():
        if revision.revision == migrations.head():
            continue
        digest = hashlib.sha256(Path(revision.path).read_bytes()).hexdigest()
        assert FROZEN.get(revision.revision) == digest, (
            f"{revision.revision} changed after release; write a new revision instead"
        )


def _populate(url: URL) -> None:
    engine = create_sync_engine(url, poolclass=NullPool)
    try:
        with Session(engine) as session, session.begin():
            session.add_all([new_session("s1", state={"k": [1, 2]}), new_session("s2")])
            session.flush()
            session.add_all(
                [new_message(sid, seq, f"m{seq}") for sid in ("s1", "s2") for seq in (1, 2)]
            )
            session.add_all(
                AgentStep(
                    session_id="s1",
                    seq=seq,
                    step_index=seq,
                    run_id="run-1",
                    kind="model",
                    model="model-a" if seq % 2 else "model-b",
                    input={"q": seq},
                    output=None,
                    tool_calls=None,
                    input_tokens=10 * seq,
                    output_tokens=seq,
                    total_tokens=11 * seq,
                    usage_extra={"cached": seq},
                    started_at=AT + timedelta(seconds=seq),
                    ended_at=None,
                    error=None,
                )
                for seq in (1, 2, 3)
            )
            session.add(
                AgentGrant(
                    session_id="s1",
                    capability="Shell(rm -rf build/)",
                    capability_hash="0" * 64,
                    granted_by="alice",
                    granted_at=AT,
                    expires_at=None,
                )
            )
            session.add_all(
                AgentCheckpoint(
                    ref=f"ck{seq}",
                    session_id="s2",
                    seq=seq,
                    parent_ref=f"ck{seq - 1}" if seq > 1 else None,
                    created_at=AT,
                    expires_at=AT + timedelta(days=1),
                    size=2,
                    payload={"pending": seq},
                )
                for seq in (1, 2)
            )
    finally:
        engine.dispose()


def _rows(url: URL) -> dict[str, list[tuple[Any, ...]]]:
    engine = create_sync_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            return {
                name: sorted(tuple(row) for row in connection.execute(select(table)))
                for name, table in metadata.tables.items()
            }
    finally:
        engine.dispose()


def _indexes(url: URL) -> set[str]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        return {str(ix["name"]) for ix in inspect(engine).get_indexes("agentledger_steps")}
    finally:
        engine.dispose()


def test_upgrading_a_populated_0001_database_keeps_every_row(scratch_url: URL) -> None:
    migrations.upgrade(scratch_url, "agentledger_0001")
    _populate(scratch_url)
    before = _rows(scratch_url)
    assert all(before.values()), before

    migrations.upgrade(scratch_url)

    assert migrations.current(scratch_url) == "agentledger_0002"
    assert INDEX in _indexes(scratch_url)
    assert _rows(scratch_url) == before
    assert drift(scratch_url) == []

    migrations.downgrade(scratch_url, "agentledger_0001")

    assert migrations.current(scratch_url) == "agentledger_0001"
    assert INDEX not in _indexes(scratch_url)
    assert _rows(scratch_url) == before


STEPS = 200_000


@pytest.fixture
def pg_at_0001(tmp_path: Path) -> Iterator[URL]:
    with scratch_database("postgresql", str(tmp_path)) as url:
        migrations.upgrade(url, "agentledger_0001")
        engine = create_engine(url, poolclass=NullPool)
        with engine.begin() as connection:
            with Session(connection) as orm:
                orm.add(new_session("s1"))
                orm.flush()
            # 90 days of steps, five models, generated in the server.
            connection.exec_driver_sql(
                "INSERT INTO agentledger_steps (session_id, seq, step_index, kind, model, "
                "input_tokens, output_tokens, total_tokens, started_at) "
                "SELECT 's1', g + 1, 0, 'model', 'model-' || (g %% 5), 10, 1, 11, "
                "timestamptz '2026-01-01' + g * interval '1 second' * "
                f"(90 * 86400.0 / {STEPS}) FROM generate_series(0, {STEPS - 1}) g"
            )
            connection.exec_driver_sql("ANALYZE agentledger_steps")
        engine.dispose()
        yield url


def _usage_statement(url: URL) -> tuple[str, Any]:
    """The statement ``ledger.steps.usage(model=..., since=...)`` runs, with parameters."""
    seen: list[tuple[str, Any]] = []
    with Ledger(url) as ledger:

        @event.listens_for(ledger.engine, "before_cursor_execute")
        def record(_c: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
            if "sum(" in statement.lower():
                seen.append((statement, parameters))

        ledger.steps.usage(model="model-3", since=datetime(2026, 3, 25, tzinfo=UTC))
    ((statement, parameters),) = seen
    return statement, parameters


def _plan(url: URL, statement: str, parameters: Any) -> str:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql("ANALYZE agentledger_steps")
            return "\n".join(
                connection.exec_driver_sql(f"EXPLAIN {statement}", parameters).scalars()
            )
    finally:
        engine.dispose()


@pytest.mark.postgresql
def test_0002_turns_the_usage_scan_into_an_index_scan(pg_at_0001: URL) -> None:
    migrations.upgrade(pg_at_0001)
    statement, parameters = _usage_statement(pg_at_0001)
    after = _plan(pg_at_0001, statement, parameters)

    migrations.downgrade(pg_at_0001, "agentledger_0001")
    before = _plan(pg_at_0001, statement, parameters)

    assert "Seq Scan on agentledger_steps" in before, before
    assert INDEX in after and "Seq Scan" not in after, after
