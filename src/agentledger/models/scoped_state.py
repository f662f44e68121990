"""AgentAppState and AgentUserState: key/value state shared beyond one session.

App state is shared by every session of an application, user state by every session
of one user of an application (Google ADK's ``app:`` and ``user:`` keys). Each row is a
JSON object with its own ``revision`` (the ``version_id_col``), independent of any
session: deleting a session leaves them, and only an explicit delete removes them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Integer
from sqlalchemy.orm import Mapped, mapped_column

from .._limits import MAX_SCOPE_LENGTH
from .base import MYSQL_TABLE_ARGS, Base
from .types import Identifier, JSONState, UTCDateTime, nonclustered_primary_key


class AgentAppState(Base):
    """The state of one application, a row of ``agentledger_app_state``.

    An application without a row reads as empty state at revision 0.
    """

    __tablename__ = "agentledger_app_state"

    app_name: Mapped[str] = mapped_column(Identifier(MAX_SCOPE_LENGTH), primary_key=True)
    """The application, as sessions name it in ``app_name``."""
    state: Mapped[dict[str, Any]] = mapped_column(JSONState())
    """The application's key/value state: a JSON object (JSONB on PostgreSQL)."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    """When the state was first written (UTC)."""
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    """When the state last changed (UTC)."""
    revision: Mapped[int] = mapped_column(Integer)
    """Optimistic-concurrency version: 1 when first written, one more per write."""

    __mapper_args__ = {"version_id_col": revision}
    __table_args__ = (MYSQL_TABLE_ARGS,)


class AgentUserState(Base):
    """The state of one user of one application, a row of ``agentledger_user_state``.

    A user without a row reads as empty state at revision 0.
    """

    __tablename__ = "agentledger_user_state"

    app_name: Mapped[str] = mapped_column(Identifier(MAX_SCOPE_LENGTH), primary_key=True)
    """The application, as sessions name it in ``app_name``."""
    user_id: Mapped[str] = mapped_column(Identifier(MAX_SCOPE_LENGTH), primary_key=True)
    """The user, as sessions name it in ``user_id``."""
    state: Mapped[dict[str, Any]] = mapped_column(JSONState())
    """The user's key/value state: a JSON object (JSONB on PostgreSQL)."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    """When the state was first written (UTC)."""
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    """When the state last changed (UTC)."""
    revision: Mapped[int] = mapped_column(Integer)
    """Optimistic-concurrency version: 1 when first written, one more per write."""

    __mapper_args__ = {"version_id_col": revision}
    __table_args__ = (
        # Wider than SQL Server's 900 bytes of clustered key: nonclustered there.
        nonclustered_primary_key("app_name", "user_id"),
        MYSQL_TABLE_ARGS,
    )
