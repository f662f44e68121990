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
from sqlalchemy.dialects import mysql, postgresql

revision: str = "agentledger_0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = ("agentledger",)
depends_on: str | Sequence[str] | None = None

MYSQL = ("mysql", "mariadb")
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


def _id(length: int) -> sa.types.TypeEngine[str]:
    # Binary collation on MariaDB/MySQL: ids, refs and capabilities are case-sensitive.
    return sa.String(length).with_variant(
        mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), *MYSQL
    )


def _timestamp() -> sa.types.TypeEngine[object]:
    return (
        sa.DateTime()
        .with_variant(mysql.DATETIME(fsp=6), *MYSQL)
        .with_variant(postgresql.TIMESTAMP(timezone=True), "postgresql")
    )


def _bigid() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _json() -> sa.types.TypeEngine[object]:
    # TEXT on SQLite: a column declared JSON gets numeric affinity there, which would
    # turn the text of a top-level JSON number into a (rounded) number.
    return sa.JSON().with_variant(sa.Text(), "sqlite")


def _state() -> sa.types.TypeEngine[object]:
    return _json().with_variant(postgresql.JSONB(), "postgresql")


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
        sa.Column("id", _id(128), nullable=False),
        sa.Column("app_name", _id(128), nullable=True),
        sa.Column("user_id", _id(128), nullable=True),
        sa.Column("title", sa.String(512), nullable=True),
        sa.Column("model", sa.String(255), nullable=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("state", _state(), nullable=False),
        sa.Column("message_count", sa.Integer(), nullable=False),
        sa.Column("message_seq", sa.Integer(), nullable=False),
        sa.Column("step_count", sa.Integer(), nullable=False),
        sa.Column("checkpoint_seq", sa.Integer(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("total_tokens", sa.BigInteger(), nullable=False),
        sa.Column("last_run", _json(), nullable=True),
        sa.Column("latest_checkpoint_ref", _id(64), nullable=True),
        sa.Column("preview", sa.String(256), nullable=True),
        sa.Column("created_at", _timestamp(), nullable=False),
        sa.Column("updated_at", _timestamp(), nullable=False),
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
        sa.Column("id", _bigid(), autoincrement=True, nullable=False),
        sa.Column("session_id", _id(128), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(32), nullable=False),
        sa.Column("content", _json(), nullable=False),
        sa.Column("metadata", _json(), nullable=False),
        sa.Column("created_at", _timestamp(), nullable=False),
        *_child_keys("agentledger_messages", schema),
        schema=schema,
        **TABLE_OPTIONS,
    )

    op.create_table(
        "agentledger_steps",
        sa.Column("id", _bigid(), autoincrement=True, nullable=False),
        sa.Column("session_id", _id(128), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("step_index", sa.Integer(), nullable=False),
        sa.Column("run_id", _id(128), nullable=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("name", sa.String(255), nullable=True),
        sa.Column("model", sa.String(255), nullable=True),
        sa.Column("input", _json(), nullable=True),
        sa.Column("output", _json(), nullable=True),
        sa.Column("tool_calls", _json(), nullable=True),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("total_tokens", sa.BigInteger(), nullable=False),
        sa.Column("usage_extra", _json(), nullable=True),
        sa.Column("started_at", _timestamp(), nullable=False),
        sa.Column("ended_at", _timestamp(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        *_child_keys("agentledger_steps", schema),
        schema=schema,
        **TABLE_OPTIONS,
    )

    op.create_table(
        "agentledger_grants",
        sa.Column("id", _bigid(), autoincrement=True, nullable=False),
        sa.Column("session_id", _id(128), nullable=False),
        sa.Column("capability", _id(4096), nullable=False),
        sa.Column("capability_hash", _id(64), nullable=False),
        sa.Column("granted_by", sa.String(255), nullable=True),
        sa.Column("granted_at", _timestamp(), nullable=False),
        sa.Column("expires_at", _timestamp(), nullable=True),
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
        sa.Column("ref", _id(64), nullable=False),
        sa.Column("session_id", _id(128), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("parent_ref", _id(64), nullable=True),
        sa.Column("created_at", _timestamp(), nullable=False),
        sa.Column("expires_at", _timestamp(), nullable=True),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("payload", _json(), nullable=False),
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
