"""The sync and async surfaces offer the same names with the same parameters."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from agentledger import AsyncLedger, AsyncUnitOfWork, Ledger, UnitOfWork
from agentledger.repositories import AsyncSessionRepository, SessionRepository, SessionsOnLedger


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


@pytest.mark.parametrize("facade", [SessionsOnLedger, AsyncSessionRepository])
def test_repository_facades_offer_every_operation_with_its_signature(facade: type) -> None:
    implementation = public_methods(SessionRepository)
    instance = facade(lambda writes, fn: None)
    offered = {
        name: inspect.signature(getattr(instance, name))
        for name in dir(instance)
        if not name.startswith("_")
    }
    assert sorted(offered) == sorted(implementation)
    for name, signature in implementation.items():
        assert parameters(offered[name]) == parameters(signature), name
        assert getattr(instance, name).__doc__ == getattr(SessionRepository, name).__doc__


async def test_ledgers_and_units_of_work_expose_the_same_repositories() -> None:
    names = ("sessions",)
    with Ledger.in_memory() as sync:
        with sync.unit_of_work() as uow:
            sync_on_uow = [type(getattr(uow, name)) for name in names]
        assert [type(getattr(sync, name)) for name in names] == [SessionsOnLedger]
    assert sync_on_uow == [SessionRepository]
    async with AsyncLedger.in_memory() as async_:
        async with async_.unit_of_work() as auow:
            async_on_uow = [type(getattr(auow, name)) for name in names]
        assert [type(getattr(async_, name)) for name in names] == [AsyncSessionRepository]
    assert async_on_uow == [AsyncSessionRepository]
