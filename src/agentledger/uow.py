"""The unit of work: one transaction with the repositories, and its async face.

``UnitOfWork`` holds one ``Work`` (a transaction on a sync ORM Session) and the
repositories bound to it. ``AsyncUnitOfWork`` holds a ``UnitOfWork`` and hands every
call to it in one greenlet hop; the ledger's ``unit_of_work()`` opens and ends them.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from .repositories import (
    AppStateRepository,
    AsyncAppStateRepository,
    AsyncCheckpointRepository,
    AsyncGrantRepository,
    AsyncMemoryRepository,
    AsyncMessageRepository,
    AsyncSessionRepository,
    AsyncStepRepository,
    AsyncUserStateRepository,
    CheckpointRepository,
    GrantRepository,
    MemoryRepository,
    MessageRepository,
    SessionRepository,
    StepRepository,
    UserStateRepository,
)
from .repositories._base import Work

ASYNC_SESSION_KEY = "agentledger_async_session"
"""Where the ``Session.info`` of an async unit of work keeps the AsyncSession in front
of it (``AsyncUnitOfWork.session``)."""


class UnitOfWork:
    """One transaction with the repositories (sync API).

    Leaving the ledger's ``with ledger.unit_of_work()`` block commits; an exception
    rolls back; after a ConflictError the unit of work is rollback-only.
    """

    def __init__(self, work: Work) -> None:
        self._work = work
        self.sessions = SessionRepository(work)
        """Sessions of this unit of work."""
        self.messages = MessageRepository(work)
        """Messages of this unit of work."""
        self.steps = StepRepository(work)
        """Steps of this unit of work."""
        self.grants = GrantRepository(work)
        """Grants of this unit of work."""
        self.checkpoints = CheckpointRepository(work)
        """Checkpoints of this unit of work."""
        self.app_state = AppStateRepository(work)
        """App state of this unit of work."""
        self.user_state = UserStateRepository(work)
        """User state of this unit of work."""
        self.memory = MemoryRepository(work)
        """Long-term memory of this unit of work."""

    @property
    def session(self) -> Session:
        """The ORM Session of this unit of work, for direct queries on the models."""
        return self._work.session


class AsyncUnitOfWork:
    """One transaction with the repositories (async API): the same repositories as
    ``UnitOfWork``, awaited.

    Leaving the ``async with ledger.unit_of_work()`` block commits; an exception rolls
    back; after a ConflictError the unit of work is rollback-only.
    """

    def __init__(self, proxied: UnitOfWork) -> None:
        self.sync_unit_of_work = proxied
        """The sync unit of work every call is handed to."""
        self.sessions = AsyncSessionRepository(proxied.sessions)
        """Sessions of this unit of work."""
        self.messages = AsyncMessageRepository(proxied.messages)
        """Messages of this unit of work."""
        self.steps = AsyncStepRepository(proxied.steps)
        """Steps of this unit of work."""
        self.grants = AsyncGrantRepository(proxied.grants)
        """Grants of this unit of work."""
        self.checkpoints = AsyncCheckpointRepository(proxied.checkpoints)
        """Checkpoints of this unit of work."""
        self.app_state = AsyncAppStateRepository(proxied.app_state)
        """App state of this unit of work."""
        self.user_state = AsyncUserStateRepository(proxied.user_state)
        """User state of this unit of work."""
        self.memory = AsyncMemoryRepository(proxied.memory)
        """Long-term memory of this unit of work."""

    @property
    def session(self) -> AsyncSession:
        """The AsyncSession of this unit of work, for direct queries on the models."""
        front = self.sync_unit_of_work.session.info[ASYNC_SESSION_KEY]
        assert isinstance(front, AsyncSession)
        return front
