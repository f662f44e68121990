"""${message}

Deploy: EXPAND (safe to run before the new code deploys) | CONTRACT (only after).
Say which, and why.

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
${imports if imports else ""}

revision: str = ${repr(up_revision)}
down_revision: str | None = ${repr(down_revision)}
branch_labels: str | Sequence[str] | None = ${repr(branch_labels)}
depends_on: str | Sequence[str] | None = ${repr(depends_on)}


def _schema() -> str | None:
    # Alembic does not apply schema_translate_map to ALTERs: every op names the schema.
    config = op.get_context().config
    return config.attributes.get("agentledger_schema") if config is not None else None


def upgrade() -> None:
    schema = _schema()
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    schema = _schema()
    ${downgrades if downgrades else "pass"}
