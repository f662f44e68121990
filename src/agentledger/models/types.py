"""Column types that behave the same on every dialect.

This module is the one home of column-type dialect differences:

- ``UTCDateTime``: SQLite and MySQL/MariaDB have no timezone-aware datetime and
  MySQL's DATETIME drops microseconds unless declared DATETIME(6); we store naive
  UTC there, TIMESTAMPTZ on PostgreSQL, and hand back aware UTC everywhere.
- ``Identifier``: MariaDB/MySQL compare strings case-insensitively by default;
  ids, refs and capabilities must not, so they get the binary collation there.
- ``JSONDocument`` / ``JSONState``: payloads are JSON (text on PostgreSQL, so
  they round-trip exactly); session state is JSONB on PostgreSQL so it can be
  queried and indexed.
- ``BigIntId``: a BIGINT primary key does not autoincrement on SQLite; INTEGER does
  (and is 64-bit there anyway).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Integer, String
from sqlalchemy.dialects import mysql, postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

from ..clock import utc

MYSQL_DIALECTS = ("mysql", "mariadb")


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime with microseconds on every dialect.

    Naive values are refused on the way in; values come back aware, in UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name in MYSQL_DIALECTS:
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        if dialect.name == "postgresql":
            return dialect.type_descriptor(postgresql.TIMESTAMP(timezone=True))
        return dialect.type_descriptor(DateTime())

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        value = utc(value, field="datetime")
        return value if dialect.name == "postgresql" else value.replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def Identifier(length: int) -> TypeEngine[str]:
    """A string compared byte for byte: binary collation on MariaDB/MySQL."""
    return String(length).with_variant(
        mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), *MYSQL_DIALECTS
    )


def JSONDocument(*, none_as_null: bool = False) -> TypeEngine[Any]:
    """A JSON payload stored as text everywhere (JSON, not JSONB, on PostgreSQL).

    With ``none_as_null`` Python ``None`` is SQL NULL (an optional field); without
    it ``None`` is the JSON value ``null`` (content may be any JSON value).
    """
    return JSON(none_as_null=none_as_null)


def JSONState() -> TypeEngine[Any]:
    """Session state: JSONB on PostgreSQL (queryable, indexable), JSON elsewhere."""
    return JSON().with_variant(postgresql.JSONB(), "postgresql")


BigIntId = BigInteger().with_variant(Integer(), "sqlite")
"""A 64-bit autoincrement primary key that also autoincrements on SQLite."""
