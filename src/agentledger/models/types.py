"""Column types that behave the same on every dialect.

This module is the one home of column-type dialect differences:

- ``UTCDateTime``: SQLite and MySQL/MariaDB have no timezone-aware datetime and
  MySQL's DATETIME drops microseconds unless declared DATETIME(6); we store naive
  UTC there, TIMESTAMPTZ on PostgreSQL, and hand back aware UTC everywhere. Oracle's
  DATE and SQL Server's DATETIME keep no microseconds (DATETIME rounds to 1/300 s):
  TIMESTAMP (6 fractional digits by default) and DATETIME2(6) there, naive UTC too.
- ``Identifier``: MariaDB/MySQL and SQL Server compare strings case-insensitively by
  default; ids, refs and capabilities must not, so they get a binary collation there
  (NVARCHAR on SQL Server, whose VARCHAR holds a code page, not Unicode).
- ``JSONDocument`` / ``JSONState``: payloads are JSON (text on PostgreSQL, so
  they round-trip exactly); session state is JSONB on PostgreSQL so it can be
  queried and indexed; on SQLite both are declared TEXT (see TextAffinityJSON);
  on Oracle both are CLOB text (see _OracleJSONText); SQL Server's JSON is
  NVARCHAR(max) already.
- ``json_text``: PostgreSQL drivers parse JSON columns themselves; we read the text
  and decode it, so a corrupt value is reported with its row.
- ``utc_day``: the UTC calendar day of a ``UTCDateTime``: PostgreSQL's TIMESTAMPTZ
  must be shifted to UTC first (the connection's time zone decides its date); the
  others already hold UTC. ``DATE(x)`` on SQLite and MariaDB/MySQL, ``TRUNC(x)`` on
  Oracle (whose DATE keeps the time of day), the standard ``CAST(x AS DATE)`` elsewhere.
- ``BigIntId``: a BIGINT primary key does not autoincrement on SQLite; INTEGER does
  (and is 64-bit there anyway).
- ``OrderedIdentifier``: an identifier that is also sorted on (LangGraph's checkpoint
  ids): byte order everywhere, so PostgreSQL's "C" collation (a database's default
  collation may sort by locale).
- ``Binary``: bytes; LONGBLOB on MariaDB/MySQL, whose BLOB stops at 64 KiB;
  VARBINARY(max) on SQL Server (its IMAGE is deprecated).
- ``LongText``: LONGTEXT on MariaDB/MySQL, NVARCHAR(max) on SQL Server (its TEXT is
  deprecated and holds a code page, not Unicode), CLOB on Oracle.

Oracle and SQL Server are not run on: their types are chosen so the schema and every
statement compile and mean the same there (tests/dialects/test_compiled_dialects.py);
Oracle's VARCHAR2 and CLOB assume the AL32UTF8 database character set (its default).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    ColumnElement,
    Date,
    DateTime,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    TextClause,
    UnicodeText,
    func,
    text,
)
from sqlalchemy.dialects import mssql, mysql, oracle, postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.types import TypeDecorator, TypeEngine

from ..clock import utc

MYSQL_DIALECTS = ("mysql", "mariadb")
MSSQL_BINARY_COLLATION = "Latin1_General_100_BIN2"
"""SQL Server's collation comparing and sorting NVARCHAR by code point, case and accent
sensitive (its default collations ignore case)."""
MSSQL_MAX_NVARCHAR = 4000
"""The longest NVARCHAR(n) SQL Server declares; longer is NVARCHAR(max)."""


def as_utc(naive: datetime) -> datetime:
    """``naive``, a UTC time without its zone, made aware. The same as
    ``naive.replace(tzinfo=UTC)`` at a quarter of its cost on CPython 3.11 (1.5 us
    against 0.4 measured here), paid once per time read."""
    return datetime.combine(naive.date(), naive.time(), UTC)


class _SQLiteUTCText(sqlite.DATETIME):
    """SQLite's DATETIME (text in SQLAlchemy's storage format, UTC without its zone),
    read straight to an aware UTC datetime: ``fromisoformat`` of the text with its zone,
    a fifth of the cost of parsing then adding the zone (0.2 us against 0.9 measured
    here), paid once per time read. Text in any other form goes through SQLAlchemy's
    own parser as before."""

    def result_processor(self, dialect: Dialect, coltype: object) -> Any:
        parse = super().result_processor(dialect, coltype)
        from_text = datetime.fromisoformat

        def process(value: str | None) -> datetime | None:
            if value is None:
                return None
            try:
                found = from_text(value + "+00:00")
            except ValueError:
                return _aware_utc(parse(value))  # type: ignore[misc]
            # A date alone ("2026-12-07") parses with its zone dropped.
            return found if found.tzinfo is UTC else _aware_utc(found)

        return process


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime with microseconds on every dialect.

    Naive values are refused on the way in; values come back aware, in UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """DATETIME(6) on MariaDB/MySQL, TIMESTAMPTZ on PostgreSQL, TIMESTAMP on Oracle,
        DATETIME2(6) on SQL Server, DATETIME elsewhere."""
        if dialect.name in MYSQL_DIALECTS:
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        if dialect.name == "postgresql":
            return dialect.type_descriptor(postgresql.TIMESTAMP(timezone=True))
        if dialect.name == "sqlite":
            return _SQLiteUTCText()  # type: ignore[no-untyped-call]
        if dialect.name == "oracle":
            return dialect.type_descriptor(oracle.TIMESTAMP())
        if dialect.name == "mssql":
            return dialect.type_descriptor(mssql.DATETIME2(precision=6))  # type: ignore[no-untyped-call]
        return dialect.type_descriptor(DateTime())

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Refuse a naive value; send UTC (naive where the column keeps no zone)."""
        if value is None:
            return None
        value = utc(value, field="datetime")
        return value if dialect.name == "postgresql" else value.replace(tzinfo=None)

    def result_processor(self, dialect: Dialect, coltype: object) -> Any:
        """Hand back an aware UTC datetime whatever the column kept, in one call per
        value: TypeDecorator's own composition (``process_result_value`` around the
        impl's processor) costs three Python calls a row, a tenth of reading a short
        message (measured in docs/benchmarks.md, "Rows to records")."""
        inner = self.impl_instance.result_processor(dialect, coltype)
        if isinstance(self.impl_instance, _SQLiteUTCText):
            return inner  # it parses straight to aware UTC
        if inner is None:
            return _aware_utc

        def process(value: object) -> datetime | None:
            return _aware_utc(inner(value))

        return process


def _aware_utc(value: datetime | None) -> datetime | None:
    """``value`` as an aware UTC datetime: naive values are UTC without their zone."""
    if value is None:
        return None
    zone = value.tzinfo
    if zone is UTC:
        return value
    return as_utc(value) if zone is None else value.astimezone(UTC)


def _mssql_identifier(length: int) -> TypeEngine[str]:
    # NVARCHAR(n) stops at 4,000; NVARCHAR(max) holds more but cannot be a key.
    declared: int | str = length if length <= MSSQL_MAX_NVARCHAR else "max"
    return mssql.NVARCHAR(declared, collation=MSSQL_BINARY_COLLATION)  # type: ignore[arg-type]


def Identifier(length: int) -> TypeEngine[str]:
    """A string compared exactly: binary collation on MariaDB/MySQL and SQL Server
    (NVARCHAR there, so any text fits)."""
    return (
        String(length)
        .with_variant(
            mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), *MYSQL_DIALECTS
        )
        .with_variant(_mssql_identifier(length), "mssql")
    )


def OrderedIdentifier(length: int) -> TypeEngine[str]:
    """An identifier compared and sorted byte for byte: binary collation on MariaDB/MySQL
    and SQL Server (code point order), the "C" collation on PostgreSQL (listings order
    by it)."""
    return (
        String(length)
        .with_variant(
            mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), *MYSQL_DIALECTS
        )
        .with_variant(postgresql.VARCHAR(length, collation="C"), "postgresql")
        .with_variant(_mssql_identifier(length), "mssql")
    )


def LongText() -> TypeEngine[str]:
    """Text of any length: MariaDB/MySQL's TEXT stops at 64 KiB, so LONGTEXT there;
    NVARCHAR(max) on SQL Server; CLOB on Oracle."""
    return (
        Text()
        .with_variant(mysql.LONGTEXT(), *MYSQL_DIALECTS)
        .with_variant(mssql.NVARCHAR("max"), "mssql")  # type: ignore[arg-type]
    )


def Binary() -> TypeEngine[bytes]:
    """Bytes of any size: BYTEA on PostgreSQL, BLOB on SQLite and Oracle, LONGBLOB on
    MariaDB/MySQL, VARBINARY(max) on SQL Server."""
    return (
        LargeBinary()
        .with_variant(mysql.LONGBLOB(), *MYSQL_DIALECTS)
        .with_variant(mssql.VARBINARY("max"), "mssql")  # type: ignore[no-untyped-call]
    )


class TextAffinityJSON(JSON):
    """SQLAlchemy's JSON type, declared TEXT on SQLite.

    SQLite gives a column declared ``JSON`` numeric affinity: the text of a top-level
    JSON number would be converted to a number on the way in, turning
    12345678901234567890 into a float and -0.0 into 0. TEXT affinity stores the text.
    """

    cache_ok = True


@compiles(TextAffinityJSON, "sqlite")
def _text_affinity_json_sqlite(type_: TextAffinityJSON, compiler: Any, **kw: Any) -> str:
    return "TEXT"


class _OracleJSONText(TypeDecorator[Any]):
    """JSON as CLOB text on Oracle, serialised like SQLAlchemy's JSON type.

    Oracle's own JSON type (21c; BLOB before) hands values to the driver's binary
    JSON, which reads numbers back as ``Decimal`` and is not text: ``json_text`` reads
    the column as the text agentledger wrote, as on every other database.
    """

    impl = Text
    cache_ok = True

    def __init__(self, *, none_as_null: bool = False) -> None:
        super().__init__()
        self.none_as_null = none_as_null
        if not none_as_null:
            # None is the JSON value null, written as text, not left out of an INSERT.
            self.should_evaluate_none = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        """The JSON text of ``value``; SQL NULL for None when ``none_as_null``."""
        if value is None and self.none_as_null:
            return None
        serializer = getattr(dialect, "_json_serializer", None) or json.dumps
        return serializer(value)

    def process_result_value(self, value: str | None, dialect: Dialect) -> Any:
        """The JSON value of the stored text."""
        if value is None:
            return None
        deserializer = getattr(dialect, "_json_deserializer", None) or json.loads
        return deserializer(value)


def JSONDocument(*, none_as_null: bool = False) -> TypeEngine[Any]:
    """A JSON payload stored as text everywhere (JSON, not JSONB, on PostgreSQL).

    With ``none_as_null`` Python ``None`` is SQL NULL (an optional field); without
    it ``None`` is the JSON value ``null`` (content may be any JSON value).
    """
    return TextAffinityJSON(none_as_null=none_as_null).with_variant(
        _OracleJSONText(none_as_null=none_as_null), "oracle"
    )


def JSONState() -> TypeEngine[Any]:
    """Session state: JSONB on PostgreSQL (queryable, indexable), JSON elsewhere (CLOB
    text on Oracle)."""
    return (
        TextAffinityJSON()
        .with_variant(postgresql.JSONB(), "postgresql")
        .with_variant(_OracleJSONText(), "oracle")
    )


BigIntId = BigInteger().with_variant(Integer(), "sqlite")
"""A 64-bit autoincrement primary key that also autoincrements on SQLite."""


class json_text(FunctionElement[str]):
    """A JSON column read as its text, so agentledger decodes it (and can say which row
    is corrupt) instead of the driver. PostgreSQL drivers parse json/jsonb themselves,
    so there the column is cast to text; on SQLite, MariaDB/MySQL, Oracle (CLOB) and SQL
    Server (NVARCHAR) JSON already arrives as text. Any other dialect's driver may
    parse its JSON type too (CockroachDB's, PostgreSQL's drivers; DuckDB's), so the
    column is cast to the dialect's Unicode text."""

    type = Text()
    inherit_cache = True
    name = "json_text"


@compiles(json_text)
def _json_text_cast(element: json_text, compiler: SQLCompiler, **kw: Any) -> str:
    text_type = compiler.dialect.type_compiler_instance.process(UnicodeText())
    return f"CAST({compiler.process(element.clauses, **kw)} AS {text_type})"


@compiles(json_text, "sqlite")
@compiles(json_text, "mysql")
@compiles(json_text, "mariadb")
@compiles(json_text, "oracle")
@compiles(json_text, "mssql")
def _json_text_as_stored(element: json_text, compiler: SQLCompiler, **kw: Any) -> str:
    return compiler.process(element.clauses, **kw)


@compiles(json_text, "postgresql")
def _json_text_postgresql(element: json_text, compiler: SQLCompiler, **kw: Any) -> str:
    return f"CAST({compiler.process(element.clauses, **kw)} AS TEXT)"


class utc_day(FunctionElement[Any]):
    """The UTC calendar day of a ``UTCDateTime`` column, as a date: what token usage per
    day groups by."""

    type = Date()
    inherit_cache = True
    name = "utc_day"


@compiles(utc_day)
def _utc_day_default(element: utc_day, compiler: SQLCompiler, **kw: Any) -> str:
    return f"CAST({compiler.process(element.clauses, **kw)} AS DATE)"


@compiles(utc_day, "sqlite", *MYSQL_DIALECTS)
def _utc_day_date(element: utc_day, compiler: SQLCompiler, **kw: Any) -> str:
    # SQLite would read CAST(text AS DATE) as a number: its DATE() parses the text.
    return f"DATE({compiler.process(element.clauses, **kw)})"


@compiles(utc_day, "oracle")
def _utc_day_oracle(element: utc_day, compiler: SQLCompiler, **kw: Any) -> str:
    # Oracle's DATE keeps the time of day; TRUNC drops it.
    return f"TRUNC({compiler.process(element.clauses, **kw)})"


@compiles(utc_day, "postgresql")
def _utc_day_postgresql(element: utc_day, compiler: SQLCompiler, **kw: Any) -> str:
    return f"DATE({compiler.process(element.clauses, **kw)} AT TIME ZONE 'UTC')"


TEXT_SEARCH_CONFIG: TextClause = text("'simple'")
"""PostgreSQL's text search configuration for keyword search: no stemming, no stopwords.
Text, not a literal column: a column without a table among an Index's expressions would
keep the index from finding its table."""


def simple_tsvector(words: ColumnElement[Any]) -> ColumnElement[Any]:
    """PostgreSQL's tsvector of ``words`` under ``TEXT_SEARCH_CONFIG``: the index and a
    search must spell it alike for the planner to use the index."""
    return func.to_tsvector(TEXT_SEARCH_CONFIG, words)


def text_indexes(words: ColumnElement[Any], table_name: str) -> tuple[Index, Index]:
    """The text indexes keyword search reads ``words`` through (see
    ``_dialects.Capabilities.text_index``): PostgreSQL's GIN index of its tsvector under
    the ``simple`` configuration (no stemming, no stopwords), and MariaDB/MySQL's
    FULLTEXT index. SQLite's is an FTS5 table of its own, which migration 0006 makes."""
    tsvector = Index(
        f"ix_{table_name}_words_tsvector",
        simple_tsvector(words),
        postgresql_using="gin",
    ).ddl_if(dialect="postgresql")
    fulltext = Index(f"ix_{table_name}_words", words, mysql_prefix="FULLTEXT")
    # SQLAlchemy takes a tuple of dialect names here, though its hint names one.
    fulltext.ddl_if(dialect=("mysql", "mariadb"))  # type: ignore[arg-type]
    return tsvector, fulltext
