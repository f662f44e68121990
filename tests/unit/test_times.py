"""Times read back: aware and in UTC, whatever the column or the driver handed back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.engine.default import DefaultDialect

from agentledger.models.types import UTCDateTime, as_utc

NAIVE = datetime(2026, 12, 7, 4, 26, 33, 123456)


def test_as_utc_is_the_naive_time_in_utc() -> None:
    made = as_utc(NAIVE)
    assert made == NAIVE.replace(tzinfo=UTC)
    assert made.tzinfo is UTC


@pytest.mark.parametrize(
    "dialect",
    [mysql.dialect(), postgresql.dialect(), DefaultDialect()],  # type: ignore[no-untyped-call]
    ids=["mysql", "postgresql", "other"],
)
def test_a_time_read_back_is_aware_and_in_utc(dialect: Dialect) -> None:
    read = UTCDateTime().dialect_impl(dialect).result_processor(dialect, None)
    assert read is not None
    elsewhere = NAIVE.replace(tzinfo=timezone(timedelta(hours=2)))
    assert read(NAIVE) == NAIVE.replace(tzinfo=UTC)
    assert read(NAIVE).tzinfo is UTC  # type: ignore[union-attr]
    assert read(elsewhere) == elsewhere
    assert read(elsewhere).tzinfo is UTC  # type: ignore[union-attr]
    assert read(None) is None


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        ("2026-12-07 04:26:33.123456", NAIVE),  # SQLAlchemy's storage format
        ("2026-12-07 04:26:33", NAIVE.replace(microsecond=0)),
        ("2026-12-07", datetime(2026, 12, 7)),  # another form: SQLAlchemy's parser reads it
    ],
)
def test_a_sqlite_time_is_read_as_the_utc_time_its_text_names(
    stored: str, expected: datetime
) -> None:
    dialect = sqlite.dialect()
    read = UTCDateTime().dialect_impl(dialect).result_processor(dialect, None)
    assert read is not None
    found = read(stored)
    assert found == expected.replace(tzinfo=UTC)
    assert found.tzinfo is UTC
    assert read(None) is None
