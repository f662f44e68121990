"""The test backends' driver probe: a driver that is not installed is skipped, never an
error, including one whose module lives in a package that is absent too (off CI: under
CI every driver is installed, and one missing fails)."""

from __future__ import annotations

import dataclasses

import pytest

from .. import databases
from ..backends import BACKENDS, Backend


def _backend(package: str | None, module: str | None = None) -> Backend:
    return dataclasses.replace(BACKENDS[0], package=package, module=module)


def test_a_driver_whose_parent_package_is_missing_is_not_installed() -> None:
    # find_spec("absent_parent.connector") imports absent_parent, which raises.
    assert not _backend("absent-parent-connector", "absent_parent_for_test.connector").installed()


def test_a_driver_whose_module_is_missing_is_not_installed() -> None:
    assert not _backend("absent-driver", "absent_driver_for_test").installed()


def test_an_installed_driver_module_is_installed() -> None:
    assert _backend("sqlalchemy", "sqlalchemy.dialects").installed()


def test_agentledgers_own_drivers_need_no_probe() -> None:
    assert _backend(None).installed()


def test_a_driver_param_is_skipped_off_ci_when_its_driver_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(databases, "IN_CI", False)
    monkeypatch.setattr(Backend, "installed", lambda self: self.package is None)
    psycopg, pg8000 = databases.driver_params("postgresql", ["psycopg", "pg8000"])
    assert not psycopg.marks[0].args[0]
    assert pg8000.marks[0].args[0]
    assert "python3 dev.py setup drivers" in pg8000.marks[0].kwargs["reason"]


def test_under_ci_a_driver_param_is_never_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(databases, "IN_CI", True)
    monkeypatch.setattr(Backend, "installed", lambda self: False)
    (pg8000,) = databases.driver_params("postgresql", ["pg8000"])
    assert not pg8000.marks[0].args[0]
