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
from sqlalchemy.dialects import mysql, postgresql

revision: str = "agentledger_0004"
down_revision: str | None = "agentledger_0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MYSQL = ("mysql", "mariadb")
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


def _id(length: int) -> sa.types.TypeEngine[str]:
    # Binary collation on MariaDB/MySQL: keys are compared exactly.
    return sa.String(length).with_variant(
        mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), *MYSQL
    )


def _ordered(length: int) -> sa.types.TypeEngine[str]:
    # Sorted on too: byte order, so the "C" collation on PostgreSQL.
    return _id(length).with_variant(postgresql.VARCHAR(length, collation="C"), "postgresql")


def _binary() -> sa.types.TypeEngine[bytes]:
    # MariaDB/MySQL's BLOB stops at 64 KiB.
    return sa.LargeBinary().with_variant(mysql.LONGBLOB(), *MYSQL)


def _timestamp() -> sa.types.TypeEngine[object]:
    return (
        sa.DateTime()
        .with_variant(mysql.DATETIME(fsp=6), *MYSQL)
        .with_variant(postgresql.TIMESTAMP(timezone=True), "postgresql")
    )


def _json() -> sa.types.TypeEngine[object]:
    # TEXT on SQLite: a column declared JSON gets numeric affinity there.
    return sa.JSON().with_variant(sa.Text(), "sqlite")


def _session(table: str, schema: str | None) -> list[sa.schema.SchemaItem]:
    target = f"{schema}.agentledger_sessions.id" if schema else "agentledger_sessions.id"
    return [
        sa.Column("session_id", _id(128), nullable=False),
        sa.Column("checkpoint_ns", _ordered(255), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"], [target], ondelete="CASCADE", name=f"fk_{table}_session_id"
        ),
    ]


def upgrade() -> None:
    schema = _schema()
    op.create_table(
        CHECKPOINTS,
        *_session(CHECKPOINTS, schema),
        sa.Column("checkpoint_id", _ordered(64), nullable=False),
        sa.Column("parent_checkpoint_id", _ordered(64), nullable=True),
        sa.Column("run_id", _id(255), nullable=True),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("checkpoint", _binary(), nullable=False),
        sa.Column("channel_versions", _json(), nullable=False),
        sa.Column(
            "metadata", _json().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.Column("created_at", _timestamp(), nullable=False),
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
        sa.Column("channel", _id(255), nullable=False),
        sa.Column("version", _id(128), nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("blob", _binary(), nullable=True),
        sa.PrimaryKeyConstraint(
            "session_id", "checkpoint_ns", "channel", "version", name=f"pk_{BLOBS}"
        ),
        schema=schema,
        **TABLE_OPTIONS,
    )
    op.create_table(
        WRITES,
        *_session(WRITES, schema),
        sa.Column("checkpoint_id", _ordered(64), nullable=False),
        sa.Column("task_id", _id(255), nullable=False),
        sa.Column("idx", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("channel", _id(255), nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("blob", _binary(), nullable=False),
        sa.Column("task_path", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint(
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
