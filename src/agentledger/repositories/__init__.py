"""Repositories: one module per aggregate, each the single implementation of its operations."""

from .sessions import AsyncSessionRepository, SessionRepository, SessionsOnLedger

__all__ = ["AsyncSessionRepository", "SessionRepository", "SessionsOnLedger"]
