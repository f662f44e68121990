"""The sync and async surfaces offer the same names with the same parameters and docs.

Each async face is a separate class written out in the source (its proxies generated
from the sync class by tools/generate_async.py), so these comparisons can fail: a
method added to a sync class without regenerating, a hand edit of a proxy, a
parameter renamed on one side.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from agentledger import AsyncLedger, AsyncUnitOfWork, Ledger, UnitOfWork, repositories
from agentledger.retention import AsyncRetention, Retention
from agentledger.transfer import AsyncTransfer, Transfer

REPOSITORIES = {
    "sessions": (repositories.SessionRepository, repositories.AsyncSessionRepository),
    "messages": (repositories.MessageRepository, repositories.AsyncMessageRepository),
    "steps": (repositories.StepRepository, repositories.AsyncStepRepository),
    "grants": (repositories.GrantRepository, repositories.AsyncGrantRepository),
    "checkpoints": (repositories.CheckpointRepository, repositories.AsyncCheckpointRepository),
    "app_state": (repositories.AppStateRepository, repositories.AsyncAppStateRepository),
    "user_state": (repositories.UserStateRepository, repositories.AsyncUserStateRepository),
}
PAIRS = [
    (Ledger, AsyncLedger),
    (UnitOfWork, AsyncUnitOfWork),
    (Transfer, AsyncTransfer),
    (Retention, AsyncRetention),
    *REPOSITORIES.values(),
    (repositories.LangGraphRepository, repositories.AsyncLangGraphRepository),
]
CONTEXT_TYPED = {"unit_of_work", "run", "in_memory", "copy_to", "langgraph"}
"""Same parameter names, other types (Connection vs AsyncConnection, a coroutine fn, an
AsyncLedger as the target, the repository's async face)."""
MADE_AT_ONCE = {"in_memory", "unit_of_work", "langgraph"}
"""Async members that give their object at once: a ledger, a context manager, a
repository whose calls are awaited."""


def public_methods(cls: type) -> dict[str, Any]:
    return {
        name: member
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_") and callable(member)
    }


def parameters(function: Any) -> list[tuple[str, Any, Any]]:
    return [
        (p.name, p.kind, p.default)
        for p in inspect.signature(function).parameters.values()
        if p.name not in ("self", "cls")
    ]


def annotations(function: Any) -> dict[str, str]:
    return {
        name: str(value).replace("Iterator[", "AsyncIterator[").replace("AsyncAsync", "Async")
        for name, value in inspect.get_annotations(function).items()
    }


@pytest.mark.parametrize(("sync", "async_"), PAIRS, ids=lambda cls: cls.__name__)
def test_each_async_face_has_the_methods_of_its_sync_class(sync: type, async_: type) -> None:
    assert sorted(public_methods(sync)) == sorted(public_methods(async_))


@pytest.mark.parametrize(("sync", "async_"), PAIRS, ids=lambda cls: cls.__name__)
def test_each_async_method_takes_the_parameters_of_its_sync_twin(sync: type, async_: type) -> None:
    sync_methods, async_methods = public_methods(sync), public_methods(async_)
    for name, method in sync_methods.items():
        if name in CONTEXT_TYPED:
            names = [p[0] for p in parameters(method)]
            assert names == [p[0] for p in parameters(async_methods[name])], name
            continue
        assert parameters(method) == parameters(async_methods[name]), name
        assert annotations(method) == annotations(async_methods[name]), name


@pytest.mark.parametrize(("sync", "async_"), PAIRS, ids=lambda cls: cls.__name__)
def test_each_async_method_has_its_sync_twins_docstring(sync: type, async_: type) -> None:
    sync_methods, async_methods = public_methods(sync), public_methods(async_)
    for name, method in sync_methods.items():
        assert method.__doc__, f"{sync.__name__}.{name} has no docstring"
        assert async_methods[name].__doc__, f"{async_.__name__}.{name} has no docstring"
        if name not in CONTEXT_TYPED:
            assert inspect.getdoc(async_methods[name]) == inspect.getdoc(method), name


@pytest.mark.parametrize(("sync", "async_"), PAIRS, ids=lambda cls: cls.__name__)
def test_each_async_method_is_awaitable_or_async_iterable(sync: type, async_: type) -> None:
    for name, member in public_methods(async_).items():
        if name in MADE_AT_ONCE:
            continue
        assert inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member), name


def test_the_ledgers_take_the_same_constructor_parameters() -> None:
    assert [p[0] for p in parameters(Ledger)] == [p[0] for p in parameters(AsyncLedger)]


SPEC_OPERATIONS = {
    "sessions": {
        "create",
        "get",
        "get_or_none",
        "exists",
        "get_or_create",
        "save",
        "finalize",
        "delete",
        "list",
        "most_recent",
        "get_by_key",
        "get_by_key_or_none",
        "get_or_create_by_key",
        "delete_by_key",
    },
    "messages": {"append", "replace", "pop", "last", "window", "since", "before", "all"},
    "steps": {"append", "last", "iterate", "count", "usage", "by_run", "by_kind"},
    "grants": {"grant", "is_granted", "active", "revoke"},
    "checkpoints": {
        "save",
        "fork",
        "latest",
        "get",
        "list",
        "delete",
        "delete_all",
        "prune",
        "purge_expired",
    },
    "app_state": {"get", "save", "merge", "delete"},
    "user_state": {"get", "save", "merge", "delete"},
}


@pytest.mark.parametrize("name", sorted(REPOSITORIES))
def test_every_repository_offers_the_operations_spec_names(name: str) -> None:
    assert SPEC_OPERATIONS[name] <= set(public_methods(REPOSITORIES[name][0]))


async def test_ledgers_and_units_of_work_hand_out_the_same_repository_classes() -> None:
    names = sorted(REPOSITORIES)
    with Ledger.in_memory() as sync:
        with sync.unit_of_work() as uow:
            on_sync_uow = [type(getattr(uow, name)) for name in names]
        on_sync_ledger = [type(getattr(sync, name)) for name in names]
    async with AsyncLedger.in_memory() as async_:
        async with async_.unit_of_work() as auow:
            on_async_uow = [type(getattr(auow, name)) for name in names]
        on_async_ledger = [type(getattr(async_, name)) for name in names]
    assert on_sync_uow == on_sync_ledger == [REPOSITORIES[name][0] for name in names]
    assert on_async_uow == on_async_ledger == [REPOSITORIES[name][1] for name in names]
