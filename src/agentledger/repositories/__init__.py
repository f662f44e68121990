"""Repositories: one module per aggregate, each the single implementation of its operations."""

from .messages import AsyncMessageRepository, MessageRepository, MessagesOnLedger
from .sessions import AsyncSessionRepository, SessionRepository, SessionsOnLedger

__all__ = [
    "AsyncMessageRepository",
    "AsyncSessionRepository",
    "MessageRepository",
    "MessagesOnLedger",
    "SessionRepository",
    "SessionsOnLedger",
]
