"""The latest sessions of an app, most recently updated first."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from agentledger import AgentSession


def latest_sessions(
    session: Session, app_name: str, n: int = 20
) -> list[tuple[str, str | None, datetime]]:
    query = (
        select(AgentSession.id, AgentSession.title, AgentSession.updated_at)
        # ix_agentledger_sessions_app_name_updated_at_id, read backwards: stops after n.
        .where(AgentSession.app_name == app_name)
        .order_by(AgentSession.updated_at.desc(), AgentSession.id.desc())
        .limit(n)
    )
    return [(id, title, updated_at) for id, title, updated_at in session.execute(query)]
