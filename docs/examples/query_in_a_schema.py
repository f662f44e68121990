"""The same ORM queries when agentledger's tables live in a PostgreSQL schema."""

from __future__ import annotations

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from agentledger import AgentSession


def sessions_of_user(engine: Engine, schema: str, user_id: str) -> list[str]:
    # The models name no schema; the map sends every statement on this engine to
    # `schema`, as Ledger(url, schema=...) does for its own.
    in_schema = engine.execution_options(schema_translate_map={None: schema})
    with Session(in_schema) as session:
        query = (
            select(AgentSession.id)
            .where(AgentSession.user_id == user_id)
            .order_by(AgentSession.updated_at.desc(), AgentSession.id.desc())
        )
        return list(session.scalars(query))
