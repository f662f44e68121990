"""An insert inside a savepoint that the server rolled back with its whole transaction
(MariaDB after a deadlock) is reported as what lost the transaction, even where the
async driver raises ROLLBACK TO's error in a greenlet of its own."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest
from greenlet import greenlet
from sqlalchemy import exc as sa_exc

from agentledger import ConflictError
from agentledger._translate import translate
from agentledger.repositories._statements import inserted_unless_stored

DEADLOCK = sa_exc.OperationalError(
    "INSERT INTO t", {}, pymysql.err.OperationalError(1213, "Deadlock found")
)


class _GoneSavepoint:
    """A savepoint the server no longer has: its rollback fails with 1305, raised in a
    greenlet of its own, as SQLAlchemy's async drivers raise it, and wrapped as
    SQLAlchemy wraps it."""

    def rollback(self) -> None:
        def driver() -> None:
            raise pymysql.err.OperationalError(1305, "SAVEPOINT sa_savepoint_1 does not exist")

        try:
            greenlet(driver).switch()
        except pymysql.err.OperationalError as gone:
            raise sa_exc.OperationalError("ROLLBACK TO SAVEPOINT", {}, gone) from gone


class _DeadlockedConnection:
    def begin_nested(self) -> _GoneSavepoint:
        return _GoneSavepoint()

    def execute(self, *_: Any) -> None:
        raise DEADLOCK


def test_a_deadlock_that_took_the_savepoint_with_it_is_a_serialization_conflict() -> None:
    with pytest.raises(sa_exc.OperationalError) as raised:
        inserted_unless_stored(_DeadlockedConnection(), None)  # type: ignore[arg-type]

    translated = translate(raised.value, None)
    assert isinstance(translated, ConflictError)
    assert translated.reason == "serialization"
