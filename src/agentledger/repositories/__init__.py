"""Repositories: one module per aggregate, each holding the single implementation of its
operations (``SessionRepository``...); their async faces (``AsyncSessionRepository``...),
whose methods are one-line hand-offs, are all in ``_async``, a module written whole by
``tools/generate_async.py``."""

from ._async import (
    AsyncAppStateRepository,
    AsyncCheckpointRepository,
    AsyncGrantRepository,
    AsyncLangGraphRepository,
    AsyncMemoryRepository,
    AsyncMessageRepository,
    AsyncSessionRepository,
    AsyncStepRepository,
    AsyncUserStateRepository,
)
from .checkpoints import CheckpointRepository
from .grants import GrantRepository
from .langgraph import LangGraphRepository
from .memory import MemoryRepository
from .messages import MessageRepository
from .scoped_state import AppStateRepository, UserStateRepository
from .sessions import SessionRepository
from .steps import StepRepository

__all__ = [
    "AppStateRepository",
    "AsyncAppStateRepository",
    "AsyncCheckpointRepository",
    "AsyncGrantRepository",
    "AsyncLangGraphRepository",
    "AsyncMemoryRepository",
    "AsyncMessageRepository",
    "AsyncSessionRepository",
    "AsyncStepRepository",
    "AsyncUserStateRepository",
    "CheckpointRepository",
    "GrantRepository",
    "LangGraphRepository",
    "MemoryRepository",
    "MessageRepository",
    "SessionRepository",
    "StepRepository",
    "UserStateRepository",
]
