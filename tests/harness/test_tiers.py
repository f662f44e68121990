"""The test tiers: which targets a test of each tier runs on (tests/backends.py), and
how a contract test declares its tier (agentledger.testing.tier)."""

from __future__ import annotations

import pytest

from agentledger.testing import tier, tier_of

from ..backends import BACKENDS, targets


def _names(found: list[object]) -> list[str]:
    return [target.name for target in found]  # type: ignore[attr-defined]


def test_a_logic_test_runs_once_on_the_in_memory_store_through_the_sync_api() -> None:
    assert _names(targets("logic")) == ["sqlite-memory-sync"]


def test_a_logic_test_that_needs_a_shared_database_runs_on_a_sqlite_file() -> None:
    assert _names(targets("logic", shared=True)) == ["sqlite-file-sync"]


def test_a_dialect_test_runs_once_on_each_database_never_in_memory() -> None:
    for rotation in ("a", "b", "c", "d"):
        found = targets("dialect", rotation=rotation)
        assert [target.dialect for target in found] == ["sqlite", "postgresql", "mysql"]
        assert not any(target.backend.in_memory for target in found)


def test_the_rotation_is_stable_and_spreads_the_dialect_tier_over_every_driver_and_api() -> None:
    assert targets("dialect", rotation="x") == targets("dialect", rotation="x")
    seen = {name for n in range(200) for name in _names(targets("dialect", rotation=str(n)))}
    every = {
        f"{backend.name}-{mode}"
        for backend in BACKENDS
        if backend.contract and not backend.in_memory
        for mode in backend.modes
    }
    assert seen == every


def test_a_driver_test_runs_on_every_contract_backend_and_api() -> None:
    expected = [
        f"{b.name}-{mode}"
        for b in BACKENDS
        if b.contract
        for mode in ("sync", "async")
        if mode in b.modes
    ]
    assert _names(targets("driver")) == expected


def test_targets_keep_to_the_apis_and_databases_asked_for() -> None:
    found = targets("driver", modes=("async",), databases=("postgresql",))
    assert _names(found) == ["postgresql-asyncpg-async", "postgresql-psycopg-async"]


def test_a_methods_tier_overrides_its_classes_and_the_default_is_dialect() -> None:
    @tier("driver")
    class Contract:
        @tier("logic")
        def test_refused(self) -> None: ...

        def test_stored(self) -> None: ...

    assert tier_of(Contract.test_refused, Contract) == "logic"
    assert tier_of(Contract.test_stored, Contract) == "driver"
    assert tier_of(Contract.test_stored) == "dialect"


def test_an_unknown_tier_is_refused_naming_the_tiers() -> None:
    with pytest.raises(ValueError, match="logic, dialect, driver"):
        tier("everywhere")  # type: ignore[arg-type]
