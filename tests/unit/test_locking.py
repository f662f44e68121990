"""Every locking read goes through ``_statements.locking``: ``FOR UPDATE``/``FOR SHARE``
where the database reads them, and SQL Server's table hints, which take the same lock
where its SQLAlchemy dialect drops ``with_for_update()``."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Column, Integer, MetaData, Select, Table, select
from sqlalchemy.dialects import mssql, mysql, postgresql, sqlite

from agentledger._dialects import capabilities, dialect_names, locking

METADATA = MetaData()
SESSIONS = Table("sessions", METADATA, Column("id", Integer, primary_key=True))
ROWS = Table("rows", METADATA, Column("id", Integer), Column("session_id", Integer))
BY_ID = select(SESSIONS.c.id).where(SESSIONS.c.id == 1)


def _sql(query: Select[Any], dialect: Any) -> str:
    return " ".join(str(query.compile(dialect=dialect)).split())


def test_an_exclusive_locking_read_on_sql_server_takes_update_locks() -> None:
    assert _sql(locking(BY_ID), mssql.dialect()) == (
        "SELECT sessions.id FROM sessions WITH (UPDLOCK, ROWLOCK) WHERE sessions.id = :id_1"
    )


def test_a_shared_locking_read_on_sql_server_holds_its_shared_locks() -> None:
    assert "FROM sessions WITH (REPEATABLEREAD, ROWLOCK)" in _sql(
        locking(BY_ID, read=True), mssql.dialect()
    )


def test_every_table_a_join_reads_from_is_locked_on_sql_server() -> None:
    joined = select(ROWS.c.id).join(SESSIONS, SESSIONS.c.id == ROWS.c.session_id)

    assert _sql(locking(joined), mssql.dialect()).count("WITH (UPDLOCK, ROWLOCK)") == 2


def test_a_table_read_only_in_a_subquery_is_not_locked_on_sql_server() -> None:
    owned = select(ROWS.c.id).where(ROWS.c.session_id.in_(select(SESSIONS.c.id)))

    assert _sql(locking(owned), mssql.dialect()).count("WITH (UPDLOCK, ROWLOCK)") == 1


@pytest.mark.parametrize("dialect", [postgresql.dialect(), sqlite.dialect(), mysql.dialect()])
@pytest.mark.parametrize(("read", "key_share"), [(False, False), (True, False), (True, True)])
def test_elsewhere_a_locking_read_is_the_one_with_for_update_gives(
    dialect: Any, read: bool, key_share: bool
) -> None:
    expected = BY_ID.with_for_update(read=read, key_share=key_share)

    assert _sql(locking(BY_ID, read=read, key_share=key_share), dialect) == _sql(expected, dialect)


def test_only_sql_server_locks_through_table_hints() -> None:
    assert dialect_names(lambda found: found.lock_hints is not None) == ("mssql",)
    assert capabilities("oracle").lock_hints is None
