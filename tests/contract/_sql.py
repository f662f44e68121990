"""What the project's own contract tests see past the public API: the SQL the
ledger's engine sends, and its tables reached directly."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import Connection, event
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.orm import Session

from agentledger.testing import Harness

T = TypeVar("T")
_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")


@contextmanager
def orm_transactions() -> Iterator[list[object]]:
    """Every ORM Session transaction begun inside the block (driver SQL begins none)."""
    begun: list[object] = []

    def record(session: Session, transaction: Any, connection: Any) -> None:
        begun.append(session)

    event.listen(Session, "after_begin", record)
    try:
        yield begun
    finally:
        event.remove(Session, "after_begin", record)


@contextmanager
def statements_during(harness: Harness) -> Iterator[list[tuple[str, Any]]]:
    """The SQL statements (with their parameters) the ledger's engine sends inside the
    block; BEGIN, COMMIT and ROLLBACK emitted by the driver itself do not show."""
    engine = harness.ledger.engine
    sync_engine = engine.sync_engine if isinstance(engine, AsyncEngine) else engine
    seen: list[tuple[str, Any]] = []

    def record(*args: Any) -> None:
        seen.append((args[2], args[3]))

    event.listen(sync_engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(sync_engine, "before_cursor_execute", record)


def starting(statements: list[tuple[str, Any]], *keywords: str) -> list[str]:
    """The statements whose SQL starts with one of ``keywords`` (in any case)."""
    wanted = tuple(keyword.upper() for keyword in keywords)
    found = [sql for sql, _ in statements if sql.lstrip().upper().startswith(wanted)]
    return found


def work(statements: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The statements that are not transaction control (BEGIN, SAVEPOINT, ...)."""
    return [(sql, p) for sql, p in statements if not sql.lstrip().upper().startswith(_CONTROL)]


async def on_engine(harness: Harness, fn: Callable[[Connection], T]) -> T:
    """``fn(connection)`` in a transaction of the ledger's own engine, committed."""
    engine = harness.ledger.engine
    if isinstance(engine, AsyncEngine):
        async with engine.begin() as connection:
            return await connection.run_sync(fn)
    with engine.begin() as connection:
        return fn(connection)
