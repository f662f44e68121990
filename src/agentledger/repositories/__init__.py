"""Repositories: one module per aggregate, each the single implementation of its operations."""

from .checkpoints import AsyncCheckpointRepository, CheckpointRepository, CheckpointsOnLedger
from .grants import AsyncGrantRepository, GrantRepository, GrantsOnLedger
from .messages import AsyncMessageRepository, MessageRepository, MessagesOnLedger
from .sessions import AsyncSessionRepository, SessionRepository, SessionsOnLedger
from .steps import AsyncStepRepository, StepRepository, StepsOnLedger

__all__ = [
    "AsyncCheckpointRepository",
    "AsyncGrantRepository",
    "AsyncMessageRepository",
    "AsyncSessionRepository",
    "AsyncStepRepository",
    "CheckpointRepository",
    "CheckpointsOnLedger",
    "GrantRepository",
    "GrantsOnLedger",
    "MessageRepository",
    "MessagesOnLedger",
    "SessionRepository",
    "SessionsOnLedger",
    "StepRepository",
    "StepsOnLedger",
]
