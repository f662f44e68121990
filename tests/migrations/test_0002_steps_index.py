"""Revision 0002 (the steps index): frozen 0001, rows kept both ways, the plan it fixes."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, event, inspect
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger import Ledger, migrations
from agentledger.models import VERSION_TABLE

from ..databases import scratch_database
from ._support import insert_legacy_rows, legacy_rows

INDEX = "ix_agentledger_steps_started_at_model"
FROZEN = {
    # A released revision never changes: ship a new one instead. When a revision
    # stops being the head, add its hash here. 0001, 0003 and 0004 changed once, to
    # take their types from models/types.py (Oracle and SQL Server, which no database
    # could have run them on): their SQL on SQLite, PostgreSQL and MariaDB/MySQL is
    # byte for byte what it was (docs/dialects.md, "Oracle and SQL Server, on paper").
    "agentledger_0001": "9439212debee5050d249965fd63081c253add74380901b508c23bb3a5392bf46",
    "agentledger_0002": "08fc016c741d1be8ad90884278aae55ac3f8650ec54bd191170b44546385b6c0",
    "agentledger_0003": "739d2a0350d5e57ce3386739afd7b256a63a1e7849112381b3b7b0e9bc414ff4",
    "agentledger_0004": "c0b6565e1732745925c13830c6502cee35a16c92e89a89be5bfb78da19eeaecd",
    "agentledger_0005": "1459167efbd0dfee85230ffd594804b1e0319cec53efc94e7ef6369898391a21",
}
FROZEN_SQL = {
    # What each released revision sends, rendered offline (the version table's own
    # statements aside: Alembic's to render). Migrations take their types from
    # models/types.py, so a changed type helper would change an old revision's SQL
    # without touching its file: a helper that must change is a new helper, and a new
    # revision.
    ("0001", "postgresql"): "2971db8fbdfb0ac2e381964bb7697d03c32f8745a2f0f0912880d8294425d812",
    ("0001", "mysql"): "f4542cdbeee5e5a9ff9c30d728a59c600f68e6d598467169abf8bd4f7f1d19fb",
    ("0001", "mariadb"): "fbc70c8f6b983dab523ccfb8f053eb214a2b6db2a6464fa9dd55dae46b68fda5",
    ("0002", "postgresql"): "543cbd375accc47bcc69740a7c17fbd6b82ac1a490e5061e05e7a00d8e50f850",
    ("0002", "mysql"): "2d1915c2e7b96a0b6815f6c00ef3416428f502588fc30ec3152286113ddc0d06",
    ("0002", "mariadb"): "2d1915c2e7b96a0b6815f6c00ef3416428f502588fc30ec3152286113ddc0d06",
    ("0003", "postgresql"): "b06bcbe8a567fb428b9e3be7b15059fe7ce53f432ce43c5c2f7c206e36af5d68",
    ("0003", "mysql"): "c92c0d23f6327ba939e2dda19f2f57f8ef63107abbcfc7506793b850edc68ad0",
    ("0003", "mariadb"): "392a008784caebc7e8580447e99a1730ee0c1b6aa4a325948fbf654733b7987b",
    ("0004", "postgresql"): "607d375faf2b18f92ff8c22a2c34be2268714856ce094fcc5fe168a69bd88083",
    ("0004", "mysql"): "628d583a5501dec21ac9d299b7f667bf43d4cb80d88961220f0f0c3cc5a4f9a1",
    ("0004", "mariadb"): "f15581685374fedc0ecbd53205fa035521c10b0137d912ee5273a63faec97715",
    ("0005", "postgresql"): "74d4c02fadd94fe194424a349353cd7a4553d19ed0003da8ece0b66ab80cd75b",
    ("0005", "mysql"): "793e09bb853e82d8372b7225aedb6d88c0fe7e9d4e254c6cab915077c8180c7d",
    ("0005", "mariadb"): "793e09bb853e82d8372b7225aedb6d88c0fe7e9d4e254c6cab915077c8180c7d",
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


def test_every_released_revision_sends_the_sql_it_was_released_with() -> None:
    script = ScriptDirectory.from_config(migrations.alembic_config())
    revisions = [r.revision for r in reversed(list(script.walk_revisions()))]
    for before, revision in zip([None, *revisions], revisions[:-1], strict=False):
        for dialect in ("postgresql", "mysql", "mariadb"):
            sql = migrations.sql(f"{dialect}://", revision, from_revision=before)
            body = "\n".join(line for line in sql.splitlines() if VERSION_TABLE not in line)
            digest = hashlib.sha256(body.encode()).hexdigest()
            number = revision.removeprefix("agentledger_")
            assert FROZEN_SQL.get((number, dialect)) == digest, (
                f"{revision}'s SQL on {dialect} changed after release (a type helper of "
                "models/types.py it uses?); write a new helper and a new revision instead"
            )


def _populate(url: URL) -> None:
    insert_legacy_rows(url)


def _indexes(url: URL) -> set[str]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        return {str(ix["name"]) for ix in inspect(engine).get_indexes("agentledger_steps")}
    finally:
        engine.dispose()


def test_upgrading_a_populated_0001_database_keeps_every_row(scratch_url: URL) -> None:
    migrations.upgrade(scratch_url, "agentledger_0001")
    _populate(scratch_url)
    before = legacy_rows(scratch_url)
    assert all(before.values()), before

    migrations.upgrade(scratch_url, "agentledger_0002")

    assert migrations.current(scratch_url) == "agentledger_0002"
    assert INDEX in _indexes(scratch_url)
    assert legacy_rows(scratch_url) == before

    migrations.downgrade(scratch_url, "agentledger_0001")

    assert migrations.current(scratch_url) == "agentledger_0001"
    assert INDEX not in _indexes(scratch_url)
    assert legacy_rows(scratch_url) == before


STEPS = 200_000


@pytest.fixture
def pg_at_0001(tmp_path: Path) -> Iterator[URL]:
    with scratch_database("postgresql", str(tmp_path)) as url:
        migrations.upgrade(url, "agentledger_0001")
        engine = create_engine(url, poolclass=NullPool)
        with engine.begin() as connection:
            connection.exec_driver_sql(
                "INSERT INTO agentledger_sessions (id, status, state, message_count, "
                "message_seq, step_count, checkpoint_seq, input_tokens, output_tokens, "
                "total_tokens, created_at, updated_at, revision) "
                "VALUES ('s1', 'active', '{}', 0, 0, 0, 0, 0, 0, 0, now(), now(), 1)"
            )
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
