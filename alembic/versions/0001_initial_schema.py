"""Initial schema: sessions, messages, steps, grants and checkpoints.

Deploy: EXPAND. Creates tables only; safe before any agentledger code runs.

Revision ID: agentledger_0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# Column types (and keys) from the models' own helpers: the history creates what the
# models declare on every dialect; models/types.py says when one may change.
from agentledger.models.types import (
    BigIntId,
    Identifier,
    JSONDocument,
    JSONState,
    PlainText,
    UTCDateTime,
)

revision: str = "agentledger_0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = ("agentledger",)
depends_on: str | Sequence[str] | None = None

TABLE_OPTIONS = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}
SESSION_INDEXES = (
    ("updated_at", "id"),
    ("app_name", "updated_at", "id"),
    ("user_id", "updated_at", "id"),
    ("status", "updated_at", "id"),
)


def _schema() -> str | None:
    # Alembic does not apply schema_translate_map to ALTERs: every op names the schema.
    config = op.get_context().config
    return config.attributes.get("agentledger_schema") if config is not None else None


def _session_fk(table: str, schema: str | None) -> sa.ForeignKeyConstraint:
    target = f"{schema}.agentledger_sessions.id" if schema else "agentledger_sessions.id"
    return sa.ForeignKeyConstraint(
        ["session_id"], [target], ondelete="CASCADE", name=f"fk_{table}_session_id"
    )


def _child_keys(table: str, schema: str | None) -> list[sa.schema.SchemaItem]:
    return [
        sa.PrimaryKeyConstraint("id", name=f"pk_{table}"),
        _session_fk(table, schema),
        sa.UniqueConstraint("session_id", "seq", name=f"uq_{table}_session_id_seq"),
    ]


def upgrade() -> None:
    schema = _schema()
    op.create_table(
        "agentledger_sessions",
        sa.Column("id", Identifier(128), nullable=False),
        sa.Column("app_name", Identifier(128), nullable=True),
        sa.Column("user_id", Identifier(128), nullable=True),
        sa.Column("title", sa.Unicode(512), nullable=True),
        sa.Column("model", sa.Unicode(255), nullable=True),
        sa.Column("status", sa.Unicode(32), nullable=False),
        sa.Column("state", JSONState(), nullable=False),
        sa.Column("message_count", sa.Integer(), nullable=False),
        sa.Column("message_seq", sa.Integer(), nullable=False),
        sa.Column("step_count", sa.Integer(), nullable=False),
        sa.Column("checkpoint_seq", sa.Integer(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("total_tokens", sa.BigInteger(), nullable=False),
        sa.Column("last_run", JSONDocument(), nullable=True),
        sa.Column("latest_checkpoint_ref", Identifier(64), nullable=True),
        sa.Column("preview", sa.Unicode(256), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_agentledger_sessions"),
        schema=schema,
        **TABLE_OPTIONS,
    )
    for columns in SESSION_INDEXES:
        op.create_index(
            "ix_agentledger_sessions_" + "_".join(columns),
            "agentledger_sessions",
            list(columns),
            schema=schema,
        )

    op.create_table(
        "agentledger_messages",
        sa.Column("id", BigIntId, autoincrement=True, nullable=False),
        sa.Column("session_id", Identifier(128), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("role", sa.Unicode(32), nullable=False),
        sa.Column("content", JSONDocument(), nullable=False),
        sa.Column("metadata", JSONDocument(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        *_child_keys("agentledger_messages", schema),
        schema=schema,
        **TABLE_OPTIONS,
    )

    op.create_table(
        "agentledger_steps",
        sa.Column("id", BigIntId, autoincrement=True, nullable=False),
        sa.Column("session_id", Identifier(128), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("step_index", sa.Integer(), nullable=False),
        sa.Column("run_id", Identifier(128), nullable=True),
        sa.Column("kind", sa.Unicode(32), nullable=False),
        sa.Column("name", sa.Unicode(255), nullable=True),
        sa.Column("model", sa.Unicode(255), nullable=True),
        sa.Column("input", JSONDocument(), nullable=True),
        sa.Column("output", JSONDocument(), nullable=True),
        sa.Column("tool_calls", JSONDocument(), nullable=True),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("total_tokens", sa.BigInteger(), nullable=False),
        sa.Column("usage_extra", JSONDocument(), nullable=True),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("ended_at", UTCDateTime(), nullable=True),
        sa.Column("error", PlainText(), nullable=True),
        *_child_keys("agentledger_steps", schema),
        schema=schema,
        **TABLE_OPTIONS,
    )

    op.create_table(
        "agentledger_grants",
        sa.Column("id", BigIntId, autoincrement=True, nullable=False),
        sa.Column("session_id", Identifier(128), nullable=False),
        sa.Column("capability", Identifier(4096), nullable=False),
        sa.Column("capability_hash", Identifier(64), nullable=False),
        sa.Column("granted_by", sa.Unicode(255), nullable=True),
        sa.Column("granted_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_agentledger_grants"),
        _session_fk("agentledger_grants", schema),
        sa.UniqueConstraint(
            "session_id", "capability_hash", name="uq_agentledger_grants_session_id_capability_hash"
        ),
        schema=schema,
        **TABLE_OPTIONS,
    )

    op.create_table(
        "agentledger_checkpoints",
        sa.Column("ref", Identifier(64), nullable=False),
        sa.Column("session_id", Identifier(128), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("parent_ref", Identifier(64), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=True),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("payload", JSONDocument(), nullable=False),
        sa.PrimaryKeyConstraint("ref", name="pk_agentledger_checkpoints"),
        _session_fk("agentledger_checkpoints", schema),
        sa.UniqueConstraint("session_id", "seq", name="uq_agentledger_checkpoints_session_id_seq"),
        schema=schema,
        **TABLE_OPTIONS,
    )
    op.create_index(
        "ix_agentledger_checkpoints_expires_at",
        "agentledger_checkpoints",
        ["expires_at"],
        schema=schema,
    )


def downgrade() -> None:
    schema = _schema()
    op.drop_index(
        "ix_agentledger_checkpoints_expires_at", table_name="agentledger_checkpoints", schema=schema
    )
    for table in (
        "agentledger_checkpoints",
        "agentledger_grants",
        "agentledger_steps",
        "agentledger_messages",
    ):
        op.drop_table(table, schema=schema)
    for columns in reversed(SESSION_INDEXES):
        op.drop_index(
            "ix_agentledger_sessions_" + "_".join(columns),
            table_name="agentledger_sessions",
            schema=schema,
        )
    op.drop_table("agentledger_sessions", schema=schema)
