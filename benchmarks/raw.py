"""The raw floor: one held connection of the plain async driver, hand-written SQL.

SQL is written once with ``?`` placeholders and rewritten per driver when first used
(``$n`` for asyncpg, ``%s`` for aiomysql). Each connection is set up the way the
library sets up its own (SQLite: WAL, synchronous=FULL, busy timeout, foreign keys;
MariaDB: CLIENT_FOUND_ROWS so an UPDATE reports matched rows).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import URL

_PLACEHOLDER = re.compile(r"\?")


def to_db_time(dialect: str, value: datetime) -> Any:
    """A UTC datetime as each driver stores it in agentledger's columns."""
    if dialect == "postgresql":
        return value
    naive = value.astimezone(UTC).replace(tzinfo=None)
    if dialect == "sqlite":  # SQLAlchemy's SQLite DateTime storage format
        return naive.strftime("%Y-%m-%d %H:%M:%S.%f")
    return naive


def from_db_time(dialect: str, value: Any) -> datetime | None:
    """An aware UTC datetime from what the driver returned."""
    if value is None:
        return None
    if dialect == "sqlite":
        value = datetime.fromisoformat(value)
    elif dialect == "postgresql":
        return value  # type: ignore[no-any-return]
    # Not value.replace(tzinfo=UTC): four times the cost on CPython 3.11, as the library
    # found (models.types.as_utc); the floor does what the library does.
    return datetime.combine(value.date(), value.time(), UTC)


_SCAN = json.JSONDecoder().raw_decode


def loads(text: str | None) -> Any:
    """json.loads's decoder without its per-call checks, as the library decodes
    (``agentledger._json.loads``): the floor is the best plain code, not the usual."""
    if text is None:
        return None
    value, end = _SCAN(text)
    return value if end == len(text) else json.loads(text)


class RawConnection:
    """A held driver connection with a tiny common surface over the three drivers."""

    def __init__(self, dialect: str, connection: Any) -> None:
        self.dialect = dialect
        self.connection = connection
        self._sql: dict[str, str] = {}
        self._tx: Any = None
        self.statements = 0
        """Statements sent, BEGIN and COMMIT not counted."""

    @classmethod
    async def open(cls, dialect: str, url: URL, *, autocommit: bool = False) -> RawConnection:
        """Connect; ``autocommit`` gives MariaDB a reader that runs no transaction (SQLite
        and asyncpg connections run none until ``begin`` anyway)."""
        if dialect == "sqlite":
            import aiosqlite

            connection = await aiosqlite.connect(url.database, isolation_level=None)
            for pragma in (
                "PRAGMA busy_timeout = 15000",
                "PRAGMA foreign_keys = ON",
                "PRAGMA journal_mode = WAL",
                "PRAGMA synchronous = FULL",
            ):
                await connection.execute(pragma)
            return cls(dialect, connection)
        if dialect == "postgresql":
            import asyncpg

            connection = await asyncpg.connect(
                host=url.host, port=url.port, user=url.username, database=url.database
            )
            return cls(dialect, connection)
        import aiomysql
        from pymysql.constants import CLIENT

        connection = await aiomysql.connect(
            host=url.host or "127.0.0.1",
            port=url.port or 3306,
            user=url.username or "root",
            password=url.password or "",
            db=url.database,
            client_flag=CLIENT.FOUND_ROWS,
            autocommit=autocommit,
            charset="utf8mb4",
        )
        return cls(dialect, connection)

    def sql(self, text: str) -> str:
        found = self._sql.get(text)
        if found is None:
            if self.dialect == "postgresql":
                counter = iter(range(1, 1000))
                found = _PLACEHOLDER.sub(lambda _m: f"${next(counter)}", text)
            elif self.dialect == "mysql":
                found = _PLACEHOLDER.sub("%s", text)
            else:
                found = text
            self._sql[text] = found
        return found

    async def begin(self, *, write: bool) -> None:
        if self.dialect == "sqlite":
            await self.connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        elif self.dialect == "postgresql":
            self._tx = self.connection.transaction()
            await self._tx.start()
        else:
            await self.connection.begin()

    async def begin_snapshot(self) -> None:
        """A read-only transaction on one snapshot, as the ledger's conversation read."""
        if self.dialect == "sqlite":
            await self.connection.execute("BEGIN")
        elif self.dialect == "postgresql":
            self._tx = self.connection.transaction(isolation="repeatable_read", readonly=True)
            await self._tx.start()
        else:
            async with self.connection.cursor() as cursor:
                await cursor.execute("START TRANSACTION READ ONLY, WITH CONSISTENT SNAPSHOT")

    async def commit(self) -> None:
        if self.dialect == "sqlite":
            await self.connection.execute("COMMIT")
        elif self.dialect == "postgresql":
            await self._tx.commit()
            self._tx = None
        else:
            await self.connection.commit()

    async def rollback(self) -> None:
        if self.dialect == "sqlite":
            await self.connection.execute("ROLLBACK")
        elif self.dialect == "postgresql":
            await self._tx.rollback()
            self._tx = None
        else:
            await self.connection.rollback()

    async def execute(self, text: str, *params: Any) -> int:
        """Run a statement; the number of rows it matched."""
        self.statements += 1
        sql = self.sql(text)
        if self.dialect == "sqlite":
            cursor = await self.connection.execute(sql, params)
            count = cursor.rowcount
            await cursor.close()
            return int(count)
        if self.dialect == "postgresql":
            status = await self.connection.execute(sql, *params)
            return int(status.rsplit(" ", 1)[-1])
        async with self.connection.cursor() as cursor:
            return int(await cursor.execute(sql, params))

    async def executemany(self, text: str, rows: list[tuple[Any, ...]]) -> None:
        self.statements += 1
        sql = self.sql(text)
        if self.dialect in ("sqlite", "postgresql"):
            await self.connection.executemany(sql, rows)
        else:
            async with self.connection.cursor() as cursor:
                await cursor.executemany(sql, rows)

    async def fetch(self, text: str, *params: Any) -> list[Any]:
        self.statements += 1
        sql = self.sql(text)
        if self.dialect == "sqlite":
            async with self.connection.execute(sql, params) as cursor:
                return list(await cursor.fetchall())
        if self.dialect == "postgresql":
            return list(await self.connection.fetch(sql, *params))
        async with self.connection.cursor() as cursor:
            await cursor.execute(sql, params)
            return list(await cursor.fetchall())

    async def close(self) -> None:
        if self.dialect == "mysql":
            self.connection.close()
        else:
            await self.connection.close()
