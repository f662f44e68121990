"""Token usage per model since a point in time (this week, say)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from agentledger import AgentStep


def usage_per_model(session: Session, since: datetime) -> dict[str | None, tuple[int, int, int]]:
    query = (
        select(
            AgentStep.model,
            func.sum(AgentStep.input_tokens),
            func.sum(AgentStep.output_tokens),
            func.sum(AgentStep.total_tokens),
        )
        # ix_agentledger_steps_started_at_model (revision 0002): only the period's steps.
        .where(AgentStep.started_at >= since)
        .group_by(AgentStep.model)
    )
    # SUM of a BIGINT is a NUMERIC (Decimal) on PostgreSQL and MySQL: make it int.
    return {
        model: (int(inputs), int(outputs), int(total))
        for model, inputs, outputs, total in session.execute(query)
    }
