"""Pooled connections are rolled back on return only when a transaction is still open:
a clean one costs no rollback, a dirty one is never handed out again mid-transaction."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import event

from agentledger import Ledger, migrations

pytestmark = pytest.mark.sqlite


def test_a_connection_returned_inside_a_transaction_is_rolled_back(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/reset.db"
    migrations.upgrade(url)
    with Ledger(url) as ledger:
        ledger.sessions.create("kept")
        raw = ledger.engine.raw_connection()
        cursor = raw.cursor()
        cursor.execute("BEGIN IMMEDIATE")
        cursor.execute("DELETE FROM agentledger_sessions")
        cursor.close()
        raw.close()  # back to the pool with the DELETE uncommitted
        assert ledger.sessions.exists("kept")
        raw = ledger.engine.raw_connection()
        assert not raw.driver_connection.in_transaction  # type: ignore[union-attr]
        raw.close()


def test_a_clean_unit_of_work_is_not_rolled_back_on_return(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/clean.db"
    migrations.upgrade(url)
    with Ledger(url) as ledger:
        ledger.sessions.create("warm-up")
        rollbacks: list[object] = []
        dialect = ledger.engine.dialect
        original = dialect.do_rollback
        event.listen(ledger.engine, "rollback", lambda *_: rollbacks.append(1))
        dialect.do_rollback = lambda connection: (rollbacks.append(1), original(connection))[1]  # type: ignore[method-assign]
        try:
            record = ledger.sessions.get("warm-up")
            ledger.messages.append(record, {"role": "user", "content": "hi"})
            ledger.messages.last("warm-up", 5)
        finally:
            dialect.do_rollback = original  # type: ignore[method-assign]
        assert rollbacks == []
