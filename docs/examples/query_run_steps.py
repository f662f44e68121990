"""The steps of one run of a session, in the order they happened."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from agentledger import AgentStep


def steps_of_run(session: Session, session_id: str, run_id: str) -> list[AgentStep]:
    query = (
        select(AgentStep)
        # ix_agentledger_steps_session_id_run_id_seq (revision 0003): the run's steps, in seq order.
        .where(AgentStep.session_id == session_id, AgentStep.run_id == run_id)
        .order_by(AgentStep.seq)
    )
    return list(session.scalars(query))
