"""Facade bases: where a repository operation runs for each surface of the API.

There is one implementation per operation (the Repository subclasses); a facade
only decides which transaction it runs in:

- ``SyncLedgerFacade`` (``Ledger.sessions``...): a fresh transaction per call.
- ``AsyncFacadeBase`` (``AsyncLedger.sessions`` and ``AsyncUnitOfWork.sessions``):
  whatever its runner does; the ledger's runner opens a fresh transaction, a unit
  of work's runner uses its own, each through one ``run_sync`` hop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Protocol, TypeVar

from ..uow import Repository, Work, writes_of

R = TypeVar("R")


class SyncRunner(Protocol):
    def __call__(self, writes: bool, fn: Callable[[Work], R], /) -> R: ...


class AsyncRunner(Protocol):
    def __call__(self, writes: bool, fn: Callable[[Work], R], /) -> Awaitable[R]: ...


class SyncLedgerFacade:
    """Runs each operation of ``_repository`` in a transaction of its own."""

    _repository: ClassVar[type[Repository]]

    def __init__(self, runner: SyncRunner) -> None:
        self._runner = runner

    def _call(self, method: Callable[..., R], /, *args: Any, **kwargs: Any) -> R:
        repository = self._repository
        return self._runner(
            writes_of(method), lambda work: method(repository(work), *args, **kwargs)
        )


class AsyncFacadeBase:
    """Runs each operation of ``_repository`` through an async runner."""

    _repository: ClassVar[type[Repository]]

    def __init__(self, runner: AsyncRunner) -> None:
        self._runner = runner

    async def _call(self, method: Callable[..., R], /, *args: Any, **kwargs: Any) -> R:
        repository = self._repository
        return await self._runner(
            writes_of(method), lambda work: method(repository(work), *args, **kwargs)
        )
