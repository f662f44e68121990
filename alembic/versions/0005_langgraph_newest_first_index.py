"""Index a thread's LangGraph checkpoints newest first with their namespace: a page of
``list`` across namespaces reads only that page.

Deploy: EXPAND. It replaces an index with a wider one on the same leading columns;
code before and after it reads through either, so it is safe to apply before the new
code deploys. Why: ``list`` without a namespace orders by (checkpoint_id, checkpoint_ns)
newest first; the index of 0004 on (session_id, checkpoint_id) gives only the first
part, so PostgreSQL read and sorted every checkpoint of the thread for a page of ten
(300 rows for a thread of 300). On (session_id, checkpoint_id, checkpoint_ns) the
page is an index range read backwards that stops at its last row.

Building it blocks writes to agentledger_langgraph_checkpoints while it runs (MariaDB
builds it online). For a large PostgreSQL table, build it first without blocking,
``CREATE INDEX CONCURRENTLY ix_agentledger_langgraph_checkpoints_newest ON
agentledger_langgraph_checkpoints (session_id, checkpoint_id, checkpoint_ns)``, and this
revision then only records itself (IF NOT EXISTS) and drops the old index.

Revision ID: agentledger_0005
Revises: agentledger_0004
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "agentledger_0005"
down_revision: str | None = "agentledger_0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHECKPOINTS = "agentledger_langgraph_checkpoints"
NEWEST = "ix_agentledger_langgraph_checkpoints_newest"
BY_SESSION = "ix_agentledger_langgraph_checkpoints_by_session"


def _schema() -> str | None:
    # Alembic does not apply schema_translate_map to ALTERs: every op names the schema.
    config = op.get_context().config
    return config.attributes.get("agentledger_schema") if config is not None else None


def upgrade() -> None:
    # IF NOT EXISTS on PostgreSQL only: MySQL 8 has no CREATE INDEX IF NOT EXISTS.
    op.create_index(
        NEWEST,
        CHECKPOINTS,
        ["session_id", "checkpoint_id", "checkpoint_ns"],
        schema=_schema(),
        if_not_exists=op.get_context().dialect.name == "postgresql" or None,
    )
    op.drop_index(BY_SESSION, table_name=CHECKPOINTS, schema=_schema())


def downgrade() -> None:
    op.create_index(BY_SESSION, CHECKPOINTS, ["session_id", "checkpoint_id"], schema=_schema())
    op.drop_index(NEWEST, table_name=CHECKPOINTS, schema=_schema())
