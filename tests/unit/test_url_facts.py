"""What a database URL names: SQLite or a server, which file, one database or two."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentledger import ValidationError
from agentledger.engine import MemoryDatabase, is_sqlite, same_database, sqlite_file


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///a.db", True),
        ("sqlite+aiosqlite:///a.db", True),
        ("sqlite://", True),
        ("postgresql://u@h/db", False),
        ("mysql+aiomysql://u@h/db", False),
    ],
)
def test_is_sqlite_names_the_database_whatever_the_driver(url: str, expected: bool) -> None:
    assert is_sqlite(url) is expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///agentledger.db", "agentledger.db"),
        ("sqlite+aiosqlite:////var/data/a.db", "/var/data/a.db"),
        ("sqlite://", None),
        ("sqlite:///:memory:", None),
        ("sqlite:///file:shared?mode=memory&cache=shared&uri=true", None),
        ("postgresql://u@h/a.db", None),
    ],
)
def test_sqlite_file_is_the_path_of_a_plain_file_only(url: str, expected: str | None) -> None:
    assert sqlite_file(url) == expected


def test_the_memdb_url_of_an_in_memory_ledger_names_no_file() -> None:
    memory = MemoryDatabase()
    try:
        assert sqlite_file(memory.url(asynchronous=False)) is None
    finally:
        memory.close()


def test_an_unusable_url_is_a_validation_error() -> None:
    with pytest.raises(ValidationError, match="not a database URL"):
        sqlite_file("not a url")


def test_one_sqlite_file_spelled_two_ways_is_one_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    absolute = f"sqlite:///{tmp_path / 'a.db'}"
    assert same_database("sqlite:///a.db", absolute.replace("sqlite:", "sqlite+aiosqlite:"))
    assert same_database("sqlite:///./sub/../a.db", absolute)
    assert not same_database("sqlite:///a.db", "sqlite:///b.db")


def test_a_symlinked_sqlite_file_is_the_same_database(tmp_path: Path) -> None:
    (tmp_path / "a.db").touch()
    os.symlink(tmp_path / "a.db", tmp_path / "link.db")
    assert same_database(f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'link.db'}")


def test_private_in_memory_databases_are_never_the_same() -> None:
    assert not same_database("sqlite://", "sqlite://")
    assert not same_database("sqlite:///:memory:", "sqlite:///:memory:")


def test_a_named_memdb_database_is_the_same_as_itself_only() -> None:
    first, second = MemoryDatabase(), MemoryDatabase()
    try:
        sync, asynchronous = first.url(asynchronous=False), first.url(asynchronous=True)
        assert same_database(sync, asynchronous)
        assert not same_database(sync, second.url(asynchronous=False))
        assert not same_database(sync, f"sqlite:///{first.name}")
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        ("postgresql://a@h/db", "postgresql+asyncpg://b:secret@h/db", True),
        ("postgresql://h/db", "postgresql://h/other", False),
        ("postgresql://h:5432/db", "postgresql://h:5433/db", False),
        ("postgresql://h1/db", "postgresql://h2/db", False),
        ("mysql://h/db", "postgresql://h/db", False),
        ("sqlite:///db", "postgresql://h/db", False),
    ],
)
def test_servers_are_compared_by_host_port_and_database(
    first: str, second: str, expected: bool
) -> None:
    assert same_database(first, second) is expected
