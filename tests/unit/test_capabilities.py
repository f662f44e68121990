"""The capabilities table answers for every dialect agentledger runs on, and only those."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sqlalchemy.dialects import mysql, postgresql, sqlite

from agentledger._dialects import CAPABILITIES, capabilities, dialect_names


def test_a_dialect_and_its_name_give_the_same_row() -> None:
    for dialect in (postgresql.dialect(), sqlite.dialect(), mysql.dialect()):
        assert capabilities(dialect) is capabilities(dialect.name) is CAPABILITIES[dialect.name]


def test_mariadb_has_the_capabilities_of_mysql() -> None:
    assert capabilities("mariadb") is capabilities("mysql")


def test_an_unknown_dialect_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="does not know the database 'oracle'"):
        capabilities("oracle")


def test_dialect_names_lists_the_dialects_with_a_capability() -> None:
    assert set(dialect_names(lambda found: found.index_hints)) == {"mysql", "mariadb"}
    assert dialect_names(lambda found: found.dml_in_cte) == ("postgresql",)


def test_galera_is_mariadb_with_a_larger_retry_budget() -> None:
    galera, mariadb = capabilities("mysql", cluster="galera"), capabilities("mysql")
    assert galera.retry_attempts > mariadb.retry_attempts
    assert replace(galera, retry_attempts=mariadb.retry_attempts) == mariadb


def test_an_unknown_cluster_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="does not know the database 'cockroach'"):
        capabilities("postgresql", cluster="cockroach")
