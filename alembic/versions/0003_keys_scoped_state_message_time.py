"""External keys, scoped state, message time and keys, steps by run and kind.

Deploy: EXPAND. Every new column is nullable, the widened columns only grow, and the
new tables and indexes are unused by code before this revision, so it is safe to
apply before the new code deploys (code before it never writes the new columns).

- agentledger_sessions: app_name and user_id widen from 128 to 255 characters (free
  text now, an email say); new ``external_key`` (a caller's key, up to 1,024
  characters) and ``external_key_hash`` (SHA-256 of app_name, user_id and the key),
  unique: look-ups by key are one indexed query.
- agentledger_messages: role widens from 32 to 255 characters; new ``external_key``,
  unique per session (idempotent appends); an index on (session_id, created_at, seq)
  for reads by time.
- agentledger_steps: new ``external_key``, unique per session; indexes on
  (session_id, run_id, seq) and (session_id, kind, seq).
- New tables agentledger_app_state (per app_name) and agentledger_user_state (per
  app_name and user_id): a JSON object with its own revision each.

Every row and revision is kept. On SQLite the three tables are rebuilt by copy
(Alembic's batch mode, foreign keys off for the run); elsewhere they are ALTERed.
Downgrade drops what this revision added and narrows the columns back, which fails
on a row whose app_name, user_id or role no longer fits.

Revision ID: agentledger_0003
Revises: agentledger_0002
Create Date: 2026-12-08
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# Column types (and keys) from the models' own helpers: the history creates what the
# models declare on every dialect; models/types.py says when one may change.
from agentledger.models.types import (
    Identifier,
    JSONState,
    UTCDateTime,
    nonclustered_primary_key,
)

revision: str = "agentledger_0003"
down_revision: str | None = "agentledger_0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE_OPTIONS = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}
SESSION_KEY = "uq_agentledger_sessions_external_key_hash"
MESSAGE_KEY = "uq_agentledger_messages_session_id_external_key"
MESSAGE_TIME = "ix_agentledger_messages_session_id_created_at_seq"
STEP_KEY = "uq_agentledger_steps_session_id_external_key"
STEP_INDEXES = {
    "ix_agentledger_steps_session_id_run_id_seq": ["session_id", "run_id", "seq"],
    "ix_agentledger_steps_session_id_kind_seq": ["session_id", "kind", "seq"],
}


def _schema() -> str | None:
    # Alembic does not apply schema_translate_map to ALTERs: every op names the schema.
    config = op.get_context().config
    return config.attributes.get("agentledger_schema") if config is not None else None


def _scoped_state_columns() -> list[sa.Column[object]]:
    return [
        sa.Column("state", JSONState(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
    ]


def upgrade() -> None:
    schema = _schema()
    with op.batch_alter_table("agentledger_sessions", schema=schema) as batch:
        for column in ("app_name", "user_id"):
            batch.alter_column(
                column, type_=Identifier(255), existing_type=Identifier(128), existing_nullable=True
            )
        batch.add_column(sa.Column("external_key", Identifier(1024), nullable=True))
        batch.add_column(sa.Column("external_key_hash", Identifier(64), nullable=True))
        batch.create_unique_constraint(SESSION_KEY, ["external_key_hash"])

    with op.batch_alter_table("agentledger_messages", schema=schema) as batch:
        batch.alter_column(
            "role", type_=sa.Unicode(255), existing_type=sa.Unicode(32), existing_nullable=False
        )
        batch.add_column(sa.Column("external_key", Identifier(255), nullable=True))
        batch.create_unique_constraint(MESSAGE_KEY, ["session_id", "external_key"])
        batch.create_index(MESSAGE_TIME, ["session_id", "created_at", "seq"])

    with op.batch_alter_table("agentledger_steps", schema=schema) as batch:
        batch.add_column(sa.Column("external_key", Identifier(255), nullable=True))
        batch.create_unique_constraint(STEP_KEY, ["session_id", "external_key"])
        for name, columns in STEP_INDEXES.items():
            batch.create_index(name, columns)

    op.create_table(
        "agentledger_app_state",
        sa.Column("app_name", Identifier(255), nullable=False),
        *_scoped_state_columns(),
        sa.PrimaryKeyConstraint("app_name", name="pk_agentledger_app_state"),
        schema=schema,
        **TABLE_OPTIONS,
    )
    op.create_table(
        "agentledger_user_state",
        sa.Column("app_name", Identifier(255), nullable=False),
        sa.Column("user_id", Identifier(255), nullable=False),
        *_scoped_state_columns(),
        nonclustered_primary_key("app_name", "user_id", name="pk_agentledger_user_state"),
        schema=schema,
        **TABLE_OPTIONS,
    )


def downgrade() -> None:
    schema = _schema()
    op.drop_table("agentledger_user_state", schema=schema)
    op.drop_table("agentledger_app_state", schema=schema)

    with op.batch_alter_table("agentledger_steps", schema=schema) as batch:
        for name in reversed(list(STEP_INDEXES)):
            batch.drop_index(name)
        batch.drop_constraint(STEP_KEY, type_="unique")
        batch.drop_column("external_key")

    with op.batch_alter_table("agentledger_messages", schema=schema) as batch:
        batch.drop_index(MESSAGE_TIME)
        batch.drop_constraint(MESSAGE_KEY, type_="unique")
        batch.drop_column("external_key")
        batch.alter_column(
            "role", type_=sa.Unicode(32), existing_type=sa.Unicode(255), existing_nullable=False
        )

    with op.batch_alter_table("agentledger_sessions", schema=schema) as batch:
        batch.drop_constraint(SESSION_KEY, type_="unique")
        batch.drop_column("external_key_hash")
        batch.drop_column("external_key")
        for column in ("app_name", "user_id"):
            batch.alter_column(
                column, type_=Identifier(128), existing_type=Identifier(255), existing_nullable=True
            )
