"""A ledger's read replicas: taken in turn, a reader that could not be reached rests
(``engine.readers``), and what ``readers=`` accepts (refused before any connection)."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import create_async_engine

from agentledger import AsyncLedger, Ledger, ValidationError
from agentledger.engine import OneEngine
from agentledger.engine.readers import REST_S, Readers


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def readers_of(count: int, clock: Clock) -> Readers:
    engines = [OneEngine(create_engine(f"sqlite:///r{n}.db"), owned=True) for n in range(count)]
    return Readers(engines, clock=clock)


def test_reads_take_the_readers_in_turn() -> None:
    readers = readers_of(3, Clock())
    assert [reader.index for reader in (readers.next() for _ in range(7)) if reader] == [
        0,
        1,
        2,
        0,
        1,
        2,
        0,
    ]


def test_a_resting_reader_is_skipped_until_its_rest_ends() -> None:
    clock = Clock()
    readers = readers_of(2, clock)
    first = readers.next()
    assert first is not None
    readers.rest(first, ConnectionError("refused"))
    assert {found.index for found in (readers.next() for _ in range(4)) if found} == {1}
    clock.now += REST_S
    assert {found.index for found in (readers.next() for _ in range(4)) if found} == {0, 1}


def test_when_every_reader_rests_the_read_goes_to_the_primary() -> None:
    readers = readers_of(1, Clock())
    reader = readers.next()
    assert reader is not None
    readers.rest(reader, ConnectionError("refused"))
    assert readers.next() is None


def test_a_reader_put_to_rest_is_logged_once_per_rest(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    readers = readers_of(1, clock)
    reader = readers.next()
    assert reader is not None
    with caplog.at_level(logging.WARNING, logger="agentledger.readers"):
        readers.rest(reader, ConnectionError("refused"))
        readers.rest(reader, ConnectionError("refused again"))
    assert len(caplog.records) == 1
    assert "reader 0 (sqlite:///r0.db) could not be reached" in caplog.text


def test_a_ledger_without_readers_is_its_own_primary() -> None:
    with Ledger("sqlite://") as ledger:
        assert ledger.primary is ledger


def test_an_async_ledger_without_readers_is_its_own_primary() -> None:
    ledger = AsyncLedger("sqlite+aiosqlite://")
    assert ledger.primary is ledger


def test_readers_of_a_sqlite_file_are_refused() -> None:
    with pytest.raises(ValidationError, match="a SQLite file has none") as raised:
        Ledger("sqlite://", readers=["sqlite:///copy.db"])
    assert raised.value.path == "readers"


def test_a_lone_url_as_readers_is_refused_not_read_letter_by_letter() -> None:
    with pytest.raises(ValidationError, match="readers must be a list") as raised:
        Ledger("postgresql://u@primary/db", readers="postgresql://u@standby/db")  # type: ignore[arg-type]
    assert raised.value.path == "readers"


def test_a_reader_of_another_kind_of_database_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"readers\[1\] .* is a mysql database") as raised:
        Ledger(
            "postgresql://u@primary/db",
            readers=["postgresql://u@standby/db", "mysql://u@replica/db"],
        )
    assert raised.value.path == "readers[1]"


def test_an_async_engine_as_a_sync_ledger_s_reader_is_refused_with_where_it_belongs() -> None:
    engine = create_async_engine("postgresql+asyncpg://u@standby/db")
    with pytest.raises(ValidationError, match=r"readers\[0\].*belongs to AsyncLedger"):
        Ledger("postgresql://u@primary/db", readers=[engine])  # type: ignore[list-item]


def test_a_sync_engine_as_an_async_ledger_s_reader_is_refused_with_where_it_belongs() -> None:
    engine = create_engine("postgresql+psycopg://u@standby/db")
    with pytest.raises(ValidationError, match=r"readers\[0\].*belongs to Ledger"):
        AsyncLedger("postgresql://u@primary/db", readers=[engine])  # type: ignore[list-item]
