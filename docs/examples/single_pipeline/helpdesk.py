"""The host's own table: support tickets, each about an agent session."""

from __future__ import annotations

from sqlalchemy import Column, ForeignKey, Integer, MetaData, String, Table

from agentledger import AgentSession

metadata = MetaData()

tickets = Table(
    "helpdesk_tickets",
    metadata,
    Column("id", Integer, primary_key=True),
    # A foreign key to agentledger's column object (not the string "agentledger_sessions.id":
    # that table is not in this MetaData), with its type: binary collation on MariaDB.
    Column(
        "session_id",
        AgentSession.__table__.c.id.type,
        ForeignKey(AgentSession.__table__.c.id, ondelete="CASCADE", name="fk_tickets_session"),
        nullable=False,
    ),
    Column("subject", String(200), nullable=False),
)
