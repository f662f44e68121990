"""Repositories: one module per aggregate, each holding the single implementation of its
operations (``SessionRepository``...) and, below it, its async face
(``AsyncSessionRepository``...), whose methods are generated one-line hand-offs."""

from .checkpoints import AsyncCheckpointRepository, CheckpointRepository
from .grants import AsyncGrantRepository, GrantRepository
from .langgraph import AsyncLangGraphRepository, LangGraphRepository
from .messages import AsyncMessageRepository, MessageRepository
from .scoped_state import (
    AppStateRepository,
    AsyncAppStateRepository,
    AsyncUserStateRepository,
    UserStateRepository,
)
from .sessions import AsyncSessionRepository, SessionRepository
from .steps import AsyncStepRepository, StepRepository

__all__ = [
    "AppStateRepository",
    "AsyncAppStateRepository",
    "AsyncCheckpointRepository",
    "AsyncGrantRepository",
    "AsyncLangGraphRepository",
    "AsyncMessageRepository",
    "AsyncSessionRepository",
    "AsyncStepRepository",
    "AsyncUserStateRepository",
    "CheckpointRepository",
    "GrantRepository",
    "LangGraphRepository",
    "MessageRepository",
    "SessionRepository",
    "StepRepository",
    "UserStateRepository",
]
