"""The capabilities a session may use now: granted and not expired."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from agentledger import AgentGrant


def active_grants(session: Session, session_id: str, now: datetime) -> list[str]:
    query = (
        select(AgentGrant.capability)
        # uq_agentledger_grants_session_id_capability_hash: the session's grants only.
        .where(
            AgentGrant.session_id == session_id,
            or_(AgentGrant.expires_at.is_(None), AgentGrant.expires_at > now),
        )
        .order_by(AgentGrant.capability)
    )
    return list(session.scalars(query))
