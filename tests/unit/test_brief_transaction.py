"""engine.brief_transaction leaves a connection as the caller had it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, create_engine, text
from sqlalchemy.pool import StaticPool

from agentledger.engine import brief_transaction

pytestmark = pytest.mark.sqlite


@pytest.fixture
def connection() -> Iterator[Connection]:
    engine = create_engine("sqlite://", poolclass=StaticPool)
    with engine.connect() as connection:
        connection.execute(text("CREATE TABLE t (x INTEGER)"))
        connection.commit()
        yield connection
    engine.dispose()


def _rows(connection: Connection) -> list[int]:
    with brief_transaction(connection):
        return [row[0] for row in connection.execute(text("SELECT x FROM t"))]


def test_a_read_leaves_no_transaction_open(connection: Connection) -> None:
    with brief_transaction(connection):
        connection.execute(text("SELECT x FROM t")).all()

    assert not connection.in_transaction()


def test_a_brief_transaction_is_rolled_back_unless_it_commits(connection: Connection) -> None:
    with brief_transaction(connection):
        connection.execute(text("INSERT INTO t VALUES (1)"))
    with brief_transaction(connection, commit=True):
        connection.execute(text("INSERT INTO t VALUES (2)"))

    assert not connection.in_transaction()
    assert _rows(connection) == [2]


def test_a_failed_block_is_rolled_back_even_when_it_would_commit(connection: Connection) -> None:
    with pytest.raises(RuntimeError), brief_transaction(connection, commit=True):
        connection.execute(text("INSERT INTO t VALUES (3)"))
        raise RuntimeError("boom")

    assert not connection.in_transaction()
    assert _rows(connection) == []


def test_the_callers_open_transaction_stays_open_and_theirs(connection: Connection) -> None:
    connection.execute(text("INSERT INTO t VALUES (4)"))
    with brief_transaction(connection, commit=True):
        connection.execute(text("INSERT INTO t VALUES (5)"))

    assert connection.in_transaction()
    connection.rollback()
    assert _rows(connection) == []
