"""Long-term memory: agentledger_memory_items.

Deploy: EXPAND. It only adds a table, which code before it never reads, so it is safe
to apply before the new code deploys.

- agentledger_memory_items: one row per (namespace, key), holding a JSON object (JSONB
  on PostgreSQL), its words for keyword search, the vectors of its embedded fields
  (float32 bytes, with their paths), when it was stored and last written, its time to
  live and when it expires (indexed, for the sweeper), and a revision for
  compare-and-set writes. A namespace is its labels joined by ``.``, sorted byte for
  byte (binary collation on MariaDB/MySQL, "C" on PostgreSQL) so a namespace and
  everything under it is one range of the primary key.

Items belong to no session. Downgrade drops the table and every memory in it.

Revision ID: agentledger_0006
Revises: agentledger_0005
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql, postgresql

revision: str = "agentledger_0006"
down_revision: str | None = "agentledger_0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MYSQL = ("mysql", "mariadb")
TABLE_OPTIONS = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}
ITEMS = "agentledger_memory_items"
BY_EXPIRY = "ix_agentledger_memory_items_expires_at"


def _schema() -> str | None:
    # Alembic does not apply schema_translate_map to ALTERs: every op names the schema.
    config = op.get_context().config
    return config.attributes.get("agentledger_schema") if config is not None else None


def _ordered(length: int) -> sa.types.TypeEngine[str]:
    # Compared and sorted byte for byte: binary collation on MariaDB/MySQL, "C" on
    # PostgreSQL.
    return (
        sa.String(length)
        .with_variant(mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), *MYSQL)
        .with_variant(postgresql.VARCHAR(length, collation="C"), "postgresql")
    )


def _timestamp() -> sa.types.TypeEngine[object]:
    return (
        sa.DateTime()
        .with_variant(mysql.DATETIME(fsp=6), *MYSQL)
        .with_variant(postgresql.TIMESTAMP(timezone=True), "postgresql")
    )


def _json() -> sa.types.TypeEngine[object]:
    # TEXT on SQLite: a column declared JSON gets numeric affinity there.
    return sa.JSON().with_variant(sa.Text(), "sqlite")


def upgrade() -> None:
    schema = _schema()
    op.create_table(
        ITEMS,
        sa.Column("namespace", _ordered(512), nullable=False),
        sa.Column("key", _ordered(255), nullable=False),
        sa.Column("value", _json().with_variant(postgresql.JSONB(), "postgresql"), nullable=False),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("embedding_paths", _json(), nullable=True),
        # MariaDB/MySQL's BLOB stops at 64 KiB.
        sa.Column(
            "embeddings", sa.LargeBinary().with_variant(mysql.LONGBLOB(), *MYSQL), nullable=True
        ),
        sa.Column("created_at", _timestamp(), nullable=False),
        sa.Column("updated_at", _timestamp(), nullable=False),
        sa.Column("ttl_minutes", sa.Double(), nullable=True),
        sa.Column("expires_at", _timestamp(), nullable=True),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("namespace", "key", name=f"pk_{ITEMS}"),
        schema=schema,
        **TABLE_OPTIONS,
    )
    op.create_index(BY_EXPIRY, ITEMS, ["expires_at"], schema=schema)


def downgrade() -> None:
    schema = _schema()
    op.drop_index(BY_EXPIRY, table_name=ITEMS, schema=schema)
    op.drop_table(ITEMS, schema=schema)
