"""The capabilities table answers for every dialect agentledger runs on, and only those,
in the profile the process asks for."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

import pytest
import sqlalchemy
from sqlalchemy.dialects import mssql, mysql, postgresql, sqlite

from agentledger._dialects import (
    _NATIVE,
    CAPABILITIES,
    capabilities,
    dialect_names,
    portable,
    profile_of,
)
from agentledger._dialects import (
    tested as suite_runs_on,
)
from agentledger.environment import EnvironmentValueError


def test_a_dialect_and_its_name_give_the_same_row() -> None:
    for dialect in (postgresql.dialect(), sqlite.dialect(), mysql.dialect()):
        assert capabilities(dialect) is capabilities(dialect.name) is CAPABILITIES[dialect.name]


def test_mariadb_has_the_capabilities_of_mysql() -> None:
    assert capabilities("mariadb") is capabilities("mysql")


def test_a_dialect_agentledger_was_not_tested_on_gets_the_portable_row() -> None:
    found = capabilities("oracle")
    assert {field: getattr(found, field) for field in FAST_PATHS_OFF} == FAST_PATHS_OFF
    assert found.migration_lock == "none"
    assert found.snapshot_read == "first_read"
    assert not suite_runs_on("oracle") and not suite_runs_on(mssql.dialect())


def test_the_dialects_of_the_suite_are_the_tested_ones() -> None:
    assert all(suite_runs_on(name) for name in ("sqlite", "postgresql", "mysql", "mariadb"))


def test_dialect_names_lists_the_dialects_with_a_capability() -> None:
    assert set(dialect_names(lambda found: found.index_hints)) == {"mysql", "mariadb"}
    assert dialect_names(lambda found: found.dml_in_cte) == ("postgresql",)


def test_galera_is_mariadb_with_a_larger_retry_budget() -> None:
    galera, mariadb = capabilities("mysql", cluster="galera"), capabilities("mysql")
    assert galera.retry_attempts > mariadb.retry_attempts
    assert replace(galera, retry_attempts=mariadb.retry_attempts) == mariadb


def test_an_unknown_cluster_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="does not know the cluster 'cockroach'"):
        capabilities("postgresql", cluster="cockroach")


FAST_PATHS_OFF = {
    "update_returning": False,
    "last_insert_id": False,
    "dml_in_cte": False,
    "upsert": None,
    "key_share_locks": False,
    "json_key_match": None,
    "json_object_rows": None,
    "row_values": False,
    "lateral": False,
    "index_hints": False,
    "driver_sql": False,
    "text_index": None,
}
WHAT_THE_DATABASE_IS = (
    "gap_locks",
    "lock_hints",
    "migration_lock",
    "snapshot_read",
    "cursors_need_transaction",
    "json_needs_cast",
    "temporary_tables_survive_rollback",
    "single_file",
    "retry_attempts",
)


@pytest.mark.parametrize("name", ["postgresql", "sqlite", "mysql"])
def test_the_portable_profile_turns_every_fast_path_off(name: str) -> None:
    found = portable(_NATIVE[name])
    assert {field: getattr(found, field) for field in FAST_PATHS_OFF} == FAST_PATHS_OFF
    assert found.insert is sqlalchemy.insert


@pytest.mark.parametrize("name", ["postgresql", "sqlite", "mysql"])
def test_the_portable_profile_keeps_what_the_database_is(name: str) -> None:
    native, found = _NATIVE[name], portable(_NATIVE[name])
    for field in WHAT_THE_DATABASE_IS:
        assert getattr(found, field) == getattr(native, field), field


def test_the_profile_is_native_unless_the_environment_asks_for_portable() -> None:
    assert profile_of({}) == "native"
    assert profile_of({"AGENTLEDGER_PROFILE": "portable"}) == "portable"
    assert profile_of({"AGENTLEDGER_PROFILE": "native"}) == "native"


def test_an_unknown_profile_is_refused_with_the_values_it_takes() -> None:
    with pytest.raises(EnvironmentValueError, match="AGENTLEDGER_PROFILE='fast': takes native"):
        profile_of({"AGENTLEDGER_PROFILE": "fast"})


def test_a_process_started_with_the_portable_profile_uses_it_for_every_dialect() -> None:
    shown = subprocess.run(
        [
            sys.executable,
            "-c",
            "from agentledger._dialects import CAPABILITIES, PROFILE_IN_USE\n"
            "print(PROFILE_IN_USE, sorted({row.upsert is None for row in CAPABILITIES.values()}))",
        ],
        env={**os.environ, "AGENTLEDGER_PROFILE": "portable"},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert shown.stdout.split() == ["portable", "[True]"]
