"""Repositories: one module per aggregate, each the single implementation of its operations."""

from .grants import AsyncGrantRepository, GrantRepository, GrantsOnLedger
from .messages import AsyncMessageRepository, MessageRepository, MessagesOnLedger
from .sessions import AsyncSessionRepository, SessionRepository, SessionsOnLedger
from .steps import AsyncStepRepository, StepRepository, StepsOnLedger

__all__ = [
    "AsyncGrantRepository",
    "AsyncMessageRepository",
    "AsyncSessionRepository",
    "AsyncStepRepository",
    "GrantRepository",
    "GrantsOnLedger",
    "MessageRepository",
    "MessagesOnLedger",
    "SessionRepository",
    "SessionsOnLedger",
    "StepRepository",
    "StepsOnLedger",
]
