"""Support tickets, each about an agent session.

Revision ID: host_0001
Revises:
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "host_0001"
down_revision = None
branch_labels = ("helpdesk",)  # the host's own branch: `alembic revision --head helpdesk@head`
depends_on = "agentledger_0001"  # the foreign key needs agentledger_sessions first

SESSION_ID = sa.String(128).with_variant(
    mysql.VARCHAR(128, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
)


def upgrade() -> None:
    op.create_table(
        "helpdesk_tickets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_id", SESSION_ID, nullable=False),
        sa.Column("subject", sa.String(200), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_helpdesk_tickets"),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["agentledger_sessions.id"],
            name="fk_tickets_session",
            ondelete="CASCADE",
        ),
    )


def downgrade() -> None:
    op.drop_table("helpdesk_tickets")
