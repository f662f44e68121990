"""Index steps by start time and model: token usage over a period reads only that period.

Deploy: EXPAND. It only adds an index, which code before and after it ignores or
uses, so it is safe to apply before the new code deploys. Why: without it
``steps.usage(since=...)`` and ``usage(model=..., since=...)`` read every step
(PostgreSQL, 400,000 steps: a sequential scan, 41 and 47 ms, growing with the table);
with it they read the period's steps (0.9 and 3 ms).

Building it blocks writes to agentledger_steps while it runs (MariaDB builds it
online). For a large PostgreSQL table, build it first without blocking, check that it
is valid, and this revision then only records itself (IF NOT EXISTS):
``CREATE INDEX CONCURRENTLY ix_agentledger_steps_started_at_model ON
agentledger_steps (started_at, model)``.

Revision ID: agentledger_0002
Revises: agentledger_0001
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "agentledger_0002"
down_revision: str | None = "agentledger_0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "ix_agentledger_steps_started_at_model"


def _schema() -> str | None:
    # Alembic does not apply schema_translate_map to ALTERs: every op names the schema.
    config = op.get_context().config
    return config.attributes.get("agentledger_schema") if config is not None else None


def upgrade() -> None:
    # IF NOT EXISTS on PostgreSQL only: MySQL 8 has no CREATE INDEX IF NOT EXISTS.
    op.create_index(
        INDEX,
        "agentledger_steps",
        ["started_at", "model"],
        schema=_schema(),
        if_not_exists=op.get_context().dialect.name == "postgresql" or None,
    )


def downgrade() -> None:
    op.drop_index(INDEX, table_name="agentledger_steps", schema=_schema())
