"""Helpers for the migration tests: drift between migrations and models, table listings."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, select
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger import migrations
from agentledger.migrations.compare import (
    include_agentledger_objects,
    quiet_about_text_indexes,
    target_metadata,
)
from agentledger.models import (
    TABLE_PREFIX,
    VERSION_TABLE,
    WORDS_TABLE,
    AgentMessage,
    AgentSession,
    metadata,
)

OUR_TABLES = frozenset(metadata.tables)

# Each child imports first, says "ready", then waits for "go": the upgrades start
# together instead of being spread over the interpreters' start-up times.
_UPGRADER = """
import sys
from agentledger import migrations
url = sys.argv[1]
print("ready", flush=True)
sys.stdin.readline()
migrations.upgrade(url)
print(migrations.current(url), flush=True)
"""


def upgrade_together(targets: list[str], timeout: float = 120) -> list[tuple[int, str, str]]:
    """``migrations.upgrade`` of each URL in a process of its own, all started at once;
    each one's exit code, output (its revision then) and error output."""
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _UPGRADER, target],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for target in targets
    ]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        outputs = [child.communicate(timeout=timeout) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    return [
        (child.returncode, out, error)
        for child, (out, error) in zip(children, outputs, strict=True)
    ]


def drift(url: URL, *, schema: str | None = None) -> list[Any]:
    """Alembic's differences between the migrated database and the models ([] = none)."""
    target = target_metadata(schema)

    def include(name: str | None, type_: str, parents: Any) -> bool:
        if type_ == "schema":
            return name == schema
        return migrations.include_agentledger_names(name, type_, parents)

    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection,
                opts={
                    "compare_type": True,
                    "include_name": include,
                    "include_object": include_agentledger_objects,
                    "include_schemas": schema is not None,
                    "version_table": VERSION_TABLE,
                    "version_table_schema": schema,
                    "target_metadata": target,
                },
            )
            with quiet_about_text_indexes():
                return list(compare_metadata(context, target))
    finally:
        engine.dispose()


def table_names(url: URL, *, schema: str | None = None) -> set[str]:
    """Every table in the database (or in ``schema``)."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            return set(inspect(connection).get_table_names(schema=schema))
    finally:
        engine.dispose()


def our_table_names(url: URL, *, schema: str | None = None) -> set[str]:
    """agentledger's tables present, the version table included (not SQLite's FTS5
    table of memory items' words, nor its shadow tables: test_0006_memory's)."""
    return {
        name
        for name in table_names(url, schema=schema)
        if name.startswith(TABLE_PREFIX) and not name.startswith(WORDS_TABLE)
    }


AT = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
LEGACY_TABLES = (
    "agentledger_sessions",
    "agentledger_messages",
    "agentledger_steps",
    "agentledger_grants",
    "agentledger_checkpoints",
)
"""The tables revision 0001 made."""
COLUMNS_0003 = {"external_key", "external_key_hash"}
"""The columns revision 0003 added to them."""


def _legacy_values() -> dict[str, list[dict[str, Any]]]:
    """Rows of every 0001 table, by the columns 0001 and 0002 know."""

    def session(
        id: str, revision: int, app_name: str | None = None, user_id: str | None = None
    ) -> dict[str, Any]:
        return {
            "id": id,
            "app_name": app_name,
            "user_id": user_id,
            "status": "active",
            "state": {"k": [1, 2], "id": id},
            **dict.fromkeys(("message_count", "message_seq", "step_count", "checkpoint_seq"), 2),
            **dict.fromkeys(("input_tokens", "output_tokens", "total_tokens"), 5),
            "created_at": AT,
            "updated_at": AT,
            "revision": revision,
        }

    return {
        "agentledger_sessions": [
            session("s1", 7, app_name="shop", user_id="ada"),
            session("s2", 3),
        ],
        "agentledger_messages": [
            {
                "session_id": sid,
                "seq": seq,
                "role": "assistant",
                "content": {"text": f"m{seq}"},
                "metadata": {},
                "created_at": AT + timedelta(seconds=seq),
            }
            for sid in ("s1", "s2")
            for seq in (1, 2)
        ],
        "agentledger_steps": [
            {
                "session_id": "s1",
                "seq": seq,
                "step_index": seq,
                "run_id": "run-1",
                "kind": "model",
                "model": "model-a" if seq % 2 else "model-b",
                "input": {"q": seq},
                "input_tokens": 10 * seq,
                "output_tokens": seq,
                "total_tokens": 11 * seq,
                "usage_extra": {"cached": seq},
                "started_at": AT + timedelta(seconds=seq),
            }
            for seq in (1, 2, 3)
        ],
        "agentledger_grants": [
            {
                "session_id": "s1",
                "capability": "Shell(rm -rf build/)",
                "capability_hash": "0" * 64,
                "granted_by": "alice",
                "granted_at": AT,
            }
        ],
        "agentledger_checkpoints": [
            {
                "ref": f"ck{seq}",
                "session_id": "s2",
                "seq": seq,
                "parent_ref": f"ck{seq - 1}" if seq > 1 else None,
                "created_at": AT,
                "expires_at": AT + timedelta(days=1),
                "size": 2,
                "payload": {"pending": seq},
            }
            for seq in (1, 2)
        ],
    }


def insert_legacy_rows(url: URL) -> None:
    """Fill a database at revision 0001 or 0002 with rows of every table (Core inserts
    of the columns those revisions have, since the models have more)."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            for name, rows in _legacy_values().items():
                connection.execute(metadata.tables[name].insert(), rows)
    finally:
        engine.dispose()


def legacy_rows(url: URL) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the 0001 tables, by the columns revisions 0001 and 0002 made."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            found = {}
            for name in LEGACY_TABLES:
                table = metadata.tables[name]
                columns = [column for column in table.c if column.name not in COLUMNS_0003]
                found[name] = sorted(tuple(row) for row in connection.execute(select(*columns)))
            return found
    finally:
        engine.dispose()


def new_session(
    id: str, *, at: datetime | None = None, state: Any = None, user_id: str | None = None
) -> AgentSession:
    """An AgentSession row with every required column filled."""
    when = at or datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    return AgentSession(
        id=id,
        user_id=user_id,
        status="active",
        state=state if state is not None else {},
        message_count=0,
        message_seq=0,
        step_count=0,
        checkpoint_seq=0,
        input_tokens=0,
        output_tokens=0,
        total_tokens=0,
        created_at=when,
        updated_at=when,
    )


def new_message(session_id: str, seq: int, content: Any = "hello") -> AgentMessage:
    """An AgentMessage row of ``session_id`` at ``seq``."""
    return AgentMessage(
        session_id=session_id,
        seq=seq,
        role="user",
        content=content,
        metadata_={},
        created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    )
