"""Checkpoints offer the same operations, parameters and docs on every surface."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from agentledger import AsyncLedger, Ledger
from agentledger.repositories import (
    AsyncCheckpointRepository,
    CheckpointRepository,
    CheckpointsOnLedger,
)

SPEC_OPERATIONS = [
    "delete",
    "delete_all",
    "fork",
    "get",
    "latest",
    "list",
    "prune",
    "purge_expired",
    "save",
]


def _parameters(function: Any) -> list[tuple[str, Any, Any]]:
    return [
        (p.name, p.kind, p.default)
        for p in inspect.signature(function).parameters.values()
        if p.name != "self"
    ]


def _public(target: Any) -> list[str]:
    return sorted(name for name in dir(target) if not name.startswith("_"))


def test_the_implementation_offers_the_operations_spec_names() -> None:
    assert _public(CheckpointRepository) == SPEC_OPERATIONS


@pytest.mark.parametrize("facade", [CheckpointsOnLedger, AsyncCheckpointRepository])
def test_facades_offer_every_operation_with_its_signature_and_doc(facade: type) -> None:
    instance = facade(lambda writes, fn: None)
    assert _public(instance) == SPEC_OPERATIONS
    for name in SPEC_OPERATIONS:
        offered = getattr(instance, name)
        implementation = getattr(CheckpointRepository, name)
        assert _parameters(offered) == _parameters(implementation), name
        assert offered.__doc__ == implementation.__doc__, name
        if facade is AsyncCheckpointRepository:
            assert inspect.iscoroutinefunction(offered), name


async def test_ledgers_and_units_of_work_expose_checkpoints() -> None:
    with Ledger.in_memory() as sync:
        assert type(sync.checkpoints) is CheckpointsOnLedger
        with sync.unit_of_work() as uow:
            assert type(uow.checkpoints) is CheckpointRepository
    async with AsyncLedger.in_memory() as async_:
        assert type(async_.checkpoints) is AsyncCheckpointRepository
        async with async_.unit_of_work() as auow:
            assert type(auow.checkpoints) is AsyncCheckpointRepository
