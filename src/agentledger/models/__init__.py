"""agentledger's declarative models: public, typed, for direct queries."""

from .base import NAMING_CONVENTION, TABLE_PREFIX, VERSION_TABLE, Base, metadata
from .checkpoint import AgentCheckpoint
from .grant import AgentGrant
from .langgraph import AgentLangGraphBlob, AgentLangGraphCheckpoint, AgentLangGraphWrite
from .memory import TEXT_INDEXES, WORDS_TABLE, AgentMemoryItem
from .message import AgentMessage
from .scoped_state import AgentAppState, AgentUserState
from .session import AgentSession
from .step import AgentStep

__all__ = [
    "NAMING_CONVENTION",
    "TABLE_PREFIX",
    "TEXT_INDEXES",
    "VERSION_TABLE",
    "WORDS_TABLE",
    "AgentAppState",
    "AgentCheckpoint",
    "AgentGrant",
    "AgentLangGraphBlob",
    "AgentLangGraphCheckpoint",
    "AgentLangGraphWrite",
    "AgentMemoryItem",
    "AgentMessage",
    "AgentSession",
    "AgentStep",
    "AgentUserState",
    "Base",
    "metadata",
]
