"""The sync and async surfaces offer the same names with the same parameters."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from agentledger import AsyncLedger, AsyncUnitOfWork, Ledger, UnitOfWork, repositories


def public_methods(cls: type) -> dict[str, inspect.Signature]:
    methods = {}
    for name, member in inspect.getmembers(cls):
        if name.startswith("_") or not callable(member):
            continue
        methods[name] = inspect.signature(getattr(cls, name))
    return methods


def parameters(signature: inspect.Signature) -> list[tuple[str, Any, Any]]:
    return [
        (p.name, p.kind, p.default)
        for p in signature.parameters.values()
        if p.name not in ("self", "cls")
    ]


@pytest.mark.parametrize(
    ("sync", "async_"),
    [(Ledger, AsyncLedger), (UnitOfWork, AsyncUnitOfWork)],
    ids=["ledger", "unit-of-work"],
)
def test_sync_and_async_classes_have_the_same_methods(sync: type, async_: type) -> None:
    sync_methods, async_methods = public_methods(sync), public_methods(async_)
    assert sorted(sync_methods) == sorted(async_methods)
    for name, signature in sync_methods.items():
        if name in ("unit_of_work", "run", "in_memory", "__init__"):
            # The same parameter names; the types differ (Connection vs AsyncConnection).
            assert [p[0] for p in parameters(signature)] == [
                p[0] for p in parameters(async_methods[name])
            ], name
        else:
            assert parameters(signature) == parameters(async_methods[name]), name


def test_constructors_take_the_same_parameters() -> None:
    assert [p[0] for p in parameters(inspect.signature(Ledger))] == [
        p[0] for p in parameters(inspect.signature(AsyncLedger))
    ]


def test_every_async_method_is_a_coroutine_function() -> None:
    for name in public_methods(AsyncLedger):
        member = getattr(AsyncLedger, name)
        if name in ("in_memory", "unit_of_work"):
            continue
        assert inspect.iscoroutinefunction(member), name


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
    },
    "messages": {"append", "replace", "last", "window", "all"},
    "steps": {"append", "last", "iterate", "count", "usage"},
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
}
REPOSITORIES = {
    "sessions": (
        repositories.SessionRepository,
        repositories.SessionsOnLedger,
        repositories.AsyncSessionRepository,
    ),
    "messages": (
        repositories.MessageRepository,
        repositories.MessagesOnLedger,
        repositories.AsyncMessageRepository,
    ),
    "steps": (
        repositories.StepRepository,
        repositories.StepsOnLedger,
        repositories.AsyncStepRepository,
    ),
    "grants": (
        repositories.GrantRepository,
        repositories.GrantsOnLedger,
        repositories.AsyncGrantRepository,
    ),
    "checkpoints": (
        repositories.CheckpointRepository,
        repositories.CheckpointsOnLedger,
        repositories.AsyncCheckpointRepository,
    ),
}


@pytest.mark.parametrize("name", sorted(REPOSITORIES))
def test_every_repository_offers_the_operations_spec_names(name: str) -> None:
    implementation = REPOSITORIES[name][0]
    assert SPEC_OPERATIONS[name] <= set(public_methods(implementation))


@pytest.mark.parametrize(
    ("name", "surface"),
    [(n, i) for n in sorted(REPOSITORIES) for i in (1, 2)],
    ids=lambda value: str(value) if isinstance(value, str) else ("sync", "async")[value - 1],
)
def test_facades_offer_every_operation_with_its_signature_and_doc(name: str, surface: int) -> None:
    implementation, facade = REPOSITORIES[name][0], REPOSITORIES[name][surface]
    instance = facade(lambda writes, fn: None)
    offered = {
        method: inspect.signature(getattr(instance, method))
        for method in dir(instance)
        if not method.startswith("_")
    }
    expected = public_methods(implementation)
    assert sorted(offered) == sorted(expected)
    for method, signature in expected.items():
        assert parameters(offered[method]) == parameters(signature), method
        assert getattr(instance, method).__doc__, method
    if surface == 2:
        for method in offered:
            member = getattr(instance, method)
            assert inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member)


async def test_ledgers_and_units_of_work_expose_the_same_repositories() -> None:
    names = sorted(REPOSITORIES)
    with Ledger.in_memory() as sync:
        with sync.unit_of_work() as uow:
            on_sync_uow = [type(getattr(uow, name)) for name in names]
        on_sync_ledger = [type(getattr(sync, name)) for name in names]
    async with AsyncLedger.in_memory() as async_:
        async with async_.unit_of_work() as auow:
            on_async_uow = [type(getattr(auow, name)) for name in names]
        on_async_ledger = [type(getattr(async_, name)) for name in names]
    assert on_sync_uow == [REPOSITORIES[name][0] for name in names]
    assert on_sync_ledger == [REPOSITORIES[name][1] for name in names]
    assert on_async_uow == on_async_ledger == [REPOSITORIES[name][2] for name in names]
