"""LangGraph's checkpointer tables: checkpoints, channel values, pending writes.

Deploy: EXPAND. It only adds tables, which code before it never reads, so it is safe
to apply before the new code deploys.

- agentledger_langgraph_checkpoints: one row per (session, namespace, checkpoint id),
  with LangGraph's parent id, the run id, the serialized checkpoint without its
  channel values (a type tag and bytes), the channel versions and the metadata (JSONB
  on PostgreSQL). Its primary key serves "newest first" in one namespace; an index on
  (session_id, checkpoint_id) serves it across namespaces, one on run_id
  ``delete_for_runs``.
- agentledger_langgraph_blobs: one row per (session, namespace, channel, version), so a
  step that changes one channel stores only that channel.
- agentledger_langgraph_writes: pending writes per (session, namespace, checkpoint,
  task, index).

A LangGraph thread is a session: every row is deleted with it (ON DELETE CASCADE).
Downgrade drops the three tables and what they hold.

Revision ID: agentledger_0004
Revises: agentledger_0003
Create Date: 2026-12-15
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# Column types (and keys) from the models' own helpers: the history creates what the
# models declare on every dialect; models/types.py says when one may change.
from agentledger.models.types import (
    Binary,
    Identifier,
    JSONDocument,
    JSONState,
    OrderedIdentifier,
    PlainText,
    UTCDateTime,
    nonclustered_primary_key,
)

revision: str = "agentledger_0004"
down_revision: str | None = "agentledger_0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE_OPTIONS = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}
CHECKPOINTS = "agentledger_langgraph_checkpoints"
BLOBS = "agentledger_langgraph_blobs"
WRITES = "agentledger_langgraph_writes"
BY_SESSION = "ix_agentledger_langgraph_checkpoints_by_session"
BY_RUN = "ix_agentledger_langgraph_checkpoints_run_id"


def _schema() -> str | None:
    # Alembic does not apply schema_translate_map to ALTERs: every op names the schema.
    config = op.get_context().config
    return config.attributes.get("agentledger_schema") if config is not None else None


def _session(table: str, schema: str | None) -> list[sa.schema.SchemaItem]:
    target = f"{schema}.agentledger_sessions.id" if schema else "agentledger_sessions.id"
    return [
        sa.Column("session_id", Identifier(128), nullable=False),
        sa.Column("checkpoint_ns", OrderedIdentifier(255), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"], [target], ondelete="CASCADE", name=f"fk_{table}_session_id"
        ),
    ]


def upgrade() -> None:
    schema = _schema()
    op.create_table(
        CHECKPOINTS,
        *_session(CHECKPOINTS, schema),
        sa.Column("checkpoint_id", OrderedIdentifier(64), nullable=False),
        sa.Column("parent_checkpoint_id", OrderedIdentifier(64), nullable=True),
        sa.Column("run_id", Identifier(255), nullable=True),
        sa.Column("type", sa.Unicode(64), nullable=False),
        sa.Column("checkpoint", Binary(), nullable=False),
        sa.Column("channel_versions", JSONDocument(), nullable=False),
        sa.Column("metadata", JSONState(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint(
            "session_id", "checkpoint_ns", "checkpoint_id", name=f"pk_{CHECKPOINTS}"
        ),
        schema=schema,
        **TABLE_OPTIONS,
    )
    op.create_index(BY_SESSION, CHECKPOINTS, ["session_id", "checkpoint_id"], schema=schema)
    op.create_index(BY_RUN, CHECKPOINTS, ["run_id"], schema=schema)
    op.create_table(
        BLOBS,
        *_session(BLOBS, schema),
        sa.Column("channel", Identifier(255), nullable=False),
        sa.Column("version", Identifier(128), nullable=False),
        sa.Column("type", sa.Unicode(64), nullable=False),
        sa.Column("blob", Binary(), nullable=True),
        nonclustered_primary_key(
            "session_id", "checkpoint_ns", "channel", "version", name=f"pk_{BLOBS}"
        ),
        schema=schema,
        **TABLE_OPTIONS,
    )
    op.create_table(
        WRITES,
        *_session(WRITES, schema),
        sa.Column("checkpoint_id", OrderedIdentifier(64), nullable=False),
        sa.Column("task_id", Identifier(255), nullable=False),
        sa.Column("idx", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("channel", Identifier(255), nullable=False),
        sa.Column("type", sa.Unicode(64), nullable=False),
        sa.Column("blob", Binary(), nullable=False),
        sa.Column("task_path", PlainText(), nullable=False),
        nonclustered_primary_key(
            "session_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", name=f"pk_{WRITES}"
        ),
        schema=schema,
        **TABLE_OPTIONS,
    )


def downgrade() -> None:
    schema = _schema()
    op.drop_table(WRITES, schema=schema)
    op.drop_table(BLOBS, schema=schema)
    op.drop_index(BY_RUN, table_name=CHECKPOINTS, schema=schema)
    op.drop_index(BY_SESSION, table_name=CHECKPOINTS, schema=schema)
    op.drop_table(CHECKPOINTS, schema=schema)
