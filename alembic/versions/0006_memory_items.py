"""Long-term memory: agentledger_memory_items.

Deploy: EXPAND. It only adds a table (with its text index: on SQLite an FTS5 table and
triggers on the new table), which code before it never reads, so it is safe to apply
before the new code deploys.

- agentledger_memory_items: one row per (namespace, key), holding a JSON object (JSONB
  on PostgreSQL), its words for keyword search, the vectors of its embedded fields
  (float32 bytes, with their paths), when it was stored and last written, its time to
  live and when it expires (indexed, for the sweeper), and a revision for
  compare-and-set writes. ``words`` (the distinct words of ``text``) is what each
  database's own text index holds, for keyword search: PostgreSQL's GIN index of
  ``to_tsvector('simple', words)``, MariaDB/MySQL's FULLTEXT index, and on SQLite an
  FTS5 table (``agentledger_memory_words``, with its shadow tables) kept by three
  triggers, made only where the SQLite build has FTS5 (keyword search then reads every
  item under its prefix). A later migration that rebuilds this table on SQLite (batch
  mode) must make those triggers again. A namespace is its labels joined by ``.``, sorted byte for
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

# Column types (and keys) from the models' own helpers: the history creates what the
# models declare on every dialect; models/types.py says when one may change.
from agentledger.models.types import (
    Binary,
    JSONDocument,
    JSONState,
    LongText,
    OrderedIdentifier,
    UTCDateTime,
    nonclustered_primary_key,
)

revision: str = "agentledger_0006"
down_revision: str | None = "agentledger_0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MYSQL = ("mysql", "mariadb")
TABLE_OPTIONS = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}
ITEMS = "agentledger_memory_items"
BY_EXPIRY = "ix_agentledger_memory_items_expires_at"
BY_TSVECTOR = "ix_agentledger_memory_items_words_tsvector"
BY_FULLTEXT = "ix_agentledger_memory_items_words"
FTS = "agentledger_memory_words"
# Constant SQL, no input in it: the table names above.
_ADD = f"INSERT INTO {FTS}(rowid, words) VALUES (new.rowid, new.words);"  # noqa: S608
_DROP = f"INSERT INTO {FTS}({FTS}, rowid, words) VALUES ('delete', old.rowid, old.words);"  # noqa: S608
FTS_TRIGGERS = {
    "insert": f"AFTER INSERT ON {ITEMS} BEGIN {_ADD} END",
    "delete": f"AFTER DELETE ON {ITEMS} BEGIN {_DROP} END",
    "update": f"AFTER UPDATE OF words ON {ITEMS} BEGIN {_DROP} {_ADD} END",
}
"""SQLite: the FTS5 table's rows follow the items' (an external-content table)."""


def _schema() -> str | None:
    # Alembic does not apply schema_translate_map to ALTERs: every op names the schema.
    config = op.get_context().config
    return config.attributes.get("agentledger_schema") if config is not None else None


def upgrade() -> None:
    schema = _schema()
    op.create_table(
        ITEMS,
        sa.Column("namespace", OrderedIdentifier(512), nullable=False),
        sa.Column("key", OrderedIdentifier(255), nullable=False),
        sa.Column("value", JSONState(), nullable=False),
        sa.Column("text", LongText(), nullable=True),
        sa.Column("words", LongText(), nullable=True),
        sa.Column("embedding_paths", JSONDocument(), nullable=True),
        sa.Column("embeddings", Binary(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("ttl_minutes", sa.Double(), nullable=True),
        sa.Column("expires_at", UTCDateTime(), nullable=True),
        sa.Column("revision", sa.Integer(), nullable=False),
        nonclustered_primary_key("namespace", "key", name=f"pk_{ITEMS}"),
        schema=schema,
        **TABLE_OPTIONS,
    )
    op.create_index(BY_EXPIRY, ITEMS, ["expires_at"], schema=schema)
    dialect = op.get_context().dialect.name
    if dialect == "postgresql":
        words = sa.text("to_tsvector('simple', words)")
        op.create_index(BY_TSVECTOR, ITEMS, [words], postgresql_using="gin", schema=schema)
    elif dialect in MYSQL:
        op.create_index(BY_FULLTEXT, ITEMS, ["words"], mysql_prefix="FULLTEXT", schema=schema)
    elif dialect == "sqlite" and _has_fts5():
        external = f"content='{ITEMS}', content_rowid='rowid'"
        op.execute(f"CREATE VIRTUAL TABLE {FTS} USING fts5(words, {external})")
        for event, body in FTS_TRIGGERS.items():
            op.execute(f"CREATE TRIGGER {FTS}_{event} {body}")


def _has_fts5() -> bool:
    # A live SQLite connection: SQLite's migrations never run offline.
    used = op.get_bind().exec_driver_sql("SELECT sqlite_compileoption_used('ENABLE_FTS5')")
    return bool(used.scalar())


def downgrade() -> None:
    schema = _schema()
    dialect = op.get_context().dialect.name
    if dialect == "postgresql":
        op.drop_index(BY_TSVECTOR, table_name=ITEMS, schema=schema)
    elif dialect in MYSQL:
        op.drop_index(BY_FULLTEXT, table_name=ITEMS, schema=schema)
    elif dialect == "sqlite":
        for event in FTS_TRIGGERS:
            op.execute(f"DROP TRIGGER IF EXISTS {FTS}_{event}")
        op.execute(f"DROP TABLE IF EXISTS {FTS}")
    op.drop_index(BY_EXPIRY, table_name=ITEMS, schema=schema)
    op.drop_table(ITEMS, schema=schema)
