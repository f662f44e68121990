"""The test backends' driver probe: a driver that is not installed is skipped, never an
error, including one whose module lives in a package that is absent too."""

from __future__ import annotations

import dataclasses

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
