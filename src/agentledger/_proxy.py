"""Typed proxies that expose one repository implementation through the other surfaces.

A facade class lists the operations it offers as ``name = sync_proxy(Impl.name)`` or
``async_proxy(Impl.name)``; each call goes to the facade's ``_call``, which decides
where the one implementation runs (a fresh transaction, or a unit of work's session
through ``run_sync``). Signatures and docstrings are the implementation's.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine
from functools import update_wrapper
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, overload

P = ParamSpec("P")
R = TypeVar("R")


class SyncFacade(Protocol):
    def _call(self, method: Callable[..., R], /, *args: Any, **kwargs: Any) -> R: ...


class AsyncFacade(Protocol):
    def _call(
        self, method: Callable[..., R], /, *args: Any, **kwargs: Any
    ) -> Coroutine[Any, Any, R]: ...


def _public_signature(method: Callable[..., Any]) -> inspect.Signature:
    signature = inspect.signature(method)
    parameters = list(signature.parameters.values())[1:]  # drop `self`
    return signature.replace(parameters=parameters)


class _Proxy(Generic[P, R]):
    def __init__(self, method: Callable[Concatenate[Any, P], R]) -> None:
        self.method = method
        self.signature = _public_signature(method)

    def _bind(self, function: Callable[..., Any]) -> None:
        update_wrapper(function, self.method)
        function.__signature__ = self.signature  # type: ignore[attr-defined]
        del function.__wrapped__  # type: ignore[attr-defined]


class SyncProxy(_Proxy[P, R]):
    @overload
    def __get__(self, facade: None, owner: type) -> SyncProxy[P, R]: ...
    @overload
    def __get__(self, facade: SyncFacade, owner: type) -> Callable[P, R]: ...
    def __get__(self, facade: SyncFacade | None, owner: type) -> Any:
        if facade is None:
            return self
        method = self.method

        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            return facade._call(method, *args, **kwargs)

        self._bind(call)
        return call


class AsyncProxy(_Proxy[P, R]):
    @overload
    def __get__(self, facade: None, owner: type) -> AsyncProxy[P, R]: ...
    @overload
    def __get__(self, facade: AsyncFacade, owner: type) -> Callable[P, Awaitable[R]]: ...
    def __get__(self, facade: AsyncFacade | None, owner: type) -> Any:
        if facade is None:
            return self
        method = self.method

        async def call(*args: P.args, **kwargs: P.kwargs) -> R:
            return await facade._call(method, *args, **kwargs)

        self._bind(call)
        return call


def sync_proxy(method: Callable[Concatenate[Any, P], R]) -> SyncProxy[P, R]:
    """Offer ``method`` of a repository implementation on a sync facade."""
    return SyncProxy(method)


def async_proxy(method: Callable[Concatenate[Any, P], R]) -> AsyncProxy[P, R]:
    """Offer ``method`` of a repository implementation on an async facade, awaitable."""
    return AsyncProxy(method)
