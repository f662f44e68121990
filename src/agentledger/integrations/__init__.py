"""agentledger as the store of an agent framework: one subpackage per framework.

``agentledger.integrations.langgraph`` (a LangGraph checkpointer),
``agentledger.integrations.openai_agents`` (an OpenAI Agents SDK session; its
``LedgerAdvancedSession`` adds the SDK's branches and usage per turn) and
``agentledger.integrations.adk`` (a Google ADK session service) each need their
framework installed (the extras ``langgraph``, ``openai-agents``, ``adk``); this module
needs nothing. It offers the framework-id rule of ``agentledger.ids``: a session made
by an adapter has the id ``<framework>.<ULID>``, which ``framework_of`` reads back.
"""

from __future__ import annotations

from datetime import datetime

from ..clock import system_clock
from ..ids import FRAMEWORKS, Framework, framework_id_prefix, framework_of
from ..ids import new_session_id as _new_session_id


def new_session_id(framework: Framework, now: datetime | None = None) -> str:
    """A new session id marked as made by ``framework``'s adapter, time-sortable by
    ``now`` (the ledger's clock; the system clock if not given)."""
    return _new_session_id(framework, now or system_clock())


__all__ = ["FRAMEWORKS", "Framework", "framework_id_prefix", "framework_of", "new_session_id"]
