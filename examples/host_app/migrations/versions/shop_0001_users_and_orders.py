"""Users and orders.

Revision ID: shop_0001
Revises:
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "shop_0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("email", sa.String(255), nullable=False),
        sa.Column("balance_cents", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_users"),
        sa.UniqueConstraint("email", name="uq_users_email"),
    )
    op.create_table(
        "orders",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("item", sa.String(100), nullable=False),
        sa.Column("amount_cents", sa.Integer(), nullable=False),
        sa.Column("agent_session_id", sa.String(128), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_orders"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_orders_user_id"),
    )
    op.create_index("ix_orders_user_id", "orders", ["user_id"])


def downgrade() -> None:
    # Dropping the table drops its index: MariaDB refuses to drop an index its foreign
    # key needs on its own.
    op.drop_table("orders")
    op.drop_table("users")
