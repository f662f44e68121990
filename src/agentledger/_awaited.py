"""A sync object behind an async face, so one body of async code serves both faces:
the LangGraph store's batch plan and the contract kit's tests are written once, against
awaitable methods, and run on a sync ledger by ``run_to_end``, without an event loop."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from .errors import UsageError

T = TypeVar("T")


class Awaited:
    """``target`` with every method awaitable; a call runs at once and never suspends.
    Attributes that are not methods are ``target``'s own (``wrapped`` may change that)."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        wrapped = self.wrapped(name, value)
        if wrapped is not None:
            return wrapped
        if not callable(value):
            return value
        return _awaitable(value)

    def wrapped(self, name: str, value: Any) -> Any | None:
        """What a subclass shows for ``name`` in place of ``value`` (None: the default)."""
        return None


def _awaitable(method: Callable[..., T]) -> Callable[..., Coroutine[Any, Any, T]]:
    async def call(*args: Any, **kwargs: Any) -> T:
        return method(*args, **kwargs)

    return call


def run_to_end(coroutine: Coroutine[Any, Any, T], *, what: str) -> T:
    """Run ``coroutine``, which awaits only ``Awaited`` calls, to its end; ``what`` names
    it in the error raised when it awaits something that suspends (it would need a loop)."""
    try:
        coroutine.send(None)
    except StopIteration as finished:
        return finished.value  # type: ignore[no-any-return]
    coroutine.close()
    raise UsageError(f"{what} awaited something that suspends: it needs an event loop")
