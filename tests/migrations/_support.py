"""Helpers for the migration tests: drift between migrations and models, table listings."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger import migrations
from agentledger.migrations.compare import target_metadata
from agentledger.models import TABLE_PREFIX, VERSION_TABLE, AgentMessage, AgentSession, metadata

OUR_TABLES = frozenset(metadata.tables)


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
                    "include_schemas": schema is not None,
                    "version_table": VERSION_TABLE,
                    "version_table_schema": schema,
                    "target_metadata": target,
                },
            )
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
    """agentledger's tables present, the version table included."""
    return {name for name in table_names(url, schema=schema) if name.startswith(TABLE_PREFIX)}


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
