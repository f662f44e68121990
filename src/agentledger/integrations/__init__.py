"""agentledger as the store of an agent framework: one subpackage per framework.

``agentledger.integrations.langgraph`` (a LangGraph checkpointer),
``agentledger.integrations.openai_agents`` (an OpenAI Agents SDK session) and
``agentledger.integrations.adk`` (a Google ADK session service) each need their
framework installed (the extras ``langgraph``, ``openai-agents``, ``adk``); this module
needs nothing and is the one place that says which framework a session belongs to.

A session made by an adapter gets the id ``<framework>.<ULID>`` (the framework's own
key is the session's external key), so the CLI, the viewer and plain SQL can tell a
LangGraph thread from an ADK session without a column of their own: ``framework_of``
reads it back, ``framework_id_prefix`` is what a ``LIKE`` filter matches.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal, get_args

from ..clock import system_clock
from ..ids import new_id

Framework = Literal["langgraph", "openai-agents", "adk"]
FRAMEWORKS: Final[tuple[Framework, ...]] = get_args(Framework)


def new_session_id(framework: Framework, now: datetime | None = None) -> str:
    """A new session id marked as made by ``framework``'s adapter, time-sortable by
    ``now`` (the ledger's clock; the system clock if not given)."""
    if framework not in FRAMEWORKS:
        raise ValueError(f"unknown framework {framework!r}: use one of {', '.join(FRAMEWORKS)}")
    return f"{framework}.{new_id(now or system_clock())}"


def framework_of(session_id: str) -> Framework | None:
    """The framework whose adapter made the session ``session_id``, None for any other."""
    prefix, dot, _ = session_id.partition(".")
    for framework in FRAMEWORKS:
        if dot and prefix == framework:
            return framework
    return None


def framework_id_prefix(framework: Framework) -> str:
    """The start every id of ``framework``'s sessions has (for ``id LIKE prefix || '%'``)."""
    return f"{framework}."


__all__ = ["FRAMEWORKS", "Framework", "framework_id_prefix", "framework_of", "new_session_id"]
