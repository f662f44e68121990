"""The most expensive sessions of a user this month, by total tokens."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from agentledger import AgentSession


def most_expensive_sessions(
    session: Session, user_id: str, now: datetime, n: int = 5
) -> list[AgentSession]:
    month_start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    query = (
        select(AgentSession)
        # ix_agentledger_sessions_user_id_updated_at_id: the user's sessions touched
        # this month, then a sort of those few by tokens.
        .where(AgentSession.user_id == user_id, AgentSession.updated_at >= month_start)
        .order_by(AgentSession.total_tokens.desc(), AgentSession.id)
        .limit(n)
    )
    return list(session.scalars(query))
