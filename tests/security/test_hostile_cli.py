"""The command line under hostile input: every error is one line with a hint and the
exit code of its kind, never a traceback; a password is masked wherever it is in a URL
and nowhere else; text from the database is never sent raw to the terminal."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from agentledger import AsyncLedger, Ledger, NewMessage, configure_sqlite_engine, metadata
from agentledger._translate import mask, scrub
from agentledger.cli import EXIT_ERROR, EXIT_OK, EXIT_SCHEMA, EXIT_UNAVAILABLE, EXIT_USAGE, main
from agentledger.cli.common import run

from ..databases import scratch_database

SECRET = "s3cr3t-Pa55w0rd"


def one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("agentledger: error: ")
    return lines[0]


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with Ledger(url) as ledger:
        ledger.upgrade()
        ledger.sessions.create("first", title="\x1b]0;OWNED\x07\x1b[2J")
        record = ledger.sessions.create("second")
        ledger.messages.append(record, NewMessage(role="user", content="\x1b[31mred\u202eevil"))
    return url


# --- URLs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("postgresql://u:pw@127.0.0.1:abc/x", "not a database URL"),
        ("mysql://root@127.0.0.1:3306/x?charset=bogus", "charset=bogus"),
    ],
)
def test_a_malformed_url_is_a_one_line_usage_error(
    capsys: pytest.CaptureFixture[str], url: str, problem: str
) -> None:
    assert main(["sessions", "list", "--url", url]) == EXIT_USAGE
    assert problem in one_error(capsys)


@pytest.mark.parametrize("scheme", ["postgresql", "mysql"])
def test_a_password_in_the_query_string_is_masked(
    capsys: pytest.CaptureFixture[str], scheme: str
) -> None:
    url = f"{scheme}://agent@127.0.0.1:1/nowhere?password={SECRET}"
    assert main(["sessions", "list", "--url", url]) == EXIT_UNAVAILABLE
    line = one_error(capsys)
    assert SECRET not in line and "password=***" in line


def test_db_upgrades_success_line_masks_a_password_in_the_query(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with scratch_database("postgresql", str(tmp_path)) as server:  # trust: any password works
        url = server.update_query_dict({"password": SECRET}).render_as_string(False)
        assert main(["db", "upgrade", "--url", url]) == EXIT_OK
    out = capsys.readouterr().out
    assert SECRET not in out and "password=***" in out


def test_masking_replaces_the_password_only_not_words_that_contain_it() -> None:
    url = make_url("postgresql://nc:nc@127.0.0.1:5432/nc_nonexistent")
    text = f"database nc_nonexistent does not exist ({url.render_as_string(False)}): nc"
    assert scrub(text, url) == (
        "database nc_nonexistent does not exist "
        "(postgresql://nc:***@127.0.0.1:5432/nc_nonexistent): ***"
    )
    assert mask("mysql://u@h/db?passwd=nc&charset=utf8mb4") == (
        "mysql://u@h/db?charset=utf8mb4&passwd=***"
    )


def test_an_unexpected_error_is_still_one_line_without_the_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"postgresql://agent:{SECRET}@db.example/x"

    def failing(_args: argparse.Namespace) -> int:
        raise RuntimeError(f"cannot use {url}\nsecond line with {SECRET}")

    assert run(failing, argparse.Namespace(url=url)) == EXIT_ERROR
    line = one_error(capsys)
    assert SECRET not in line and "RuntimeError" in line and "to fix:" in line


# --- output -------------------------------------------------------------------------------


def test_sessions_list_escapes_control_characters(
    capsys: pytest.CaptureFixture[str], db: str
) -> None:
    assert main(["sessions", "list", "--url", db]) == EXIT_OK
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "\\x1b]0;OWNED\\x07\\x1b[2J" in out and "\\u202eevil" in out


def test_sessions_list_says_when_more_rows_exist_and_how_to_see_them(
    capsys: pytest.CaptureFixture[str], db: str
) -> None:
    assert main(["sessions", "list", "--url", db, "--limit", "1"]) == EXIT_OK
    shown = capsys.readouterr()
    assert len(shown.out.strip().splitlines()) == 2  # the header and one row
    assert "more exist" in shown.err and "--limit" in shown.err and "--all" in shown.err
    assert main(["sessions", "list", "--url", db, "--all"]) == EXIT_OK
    every = capsys.readouterr()
    assert len(every.out.strip().splitlines()) == 3 and every.err == ""


# --- hints --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda path: path.mkdir(), "is a directory, not a SQLite database file"),
        (lambda path: path.write_bytes(b"garbage, not a database"), "is not a SQLite database"),
        (lambda path: None, "there is no folder"),
    ],
    ids=["directory", "garbage", "missing-folder"],
)
def test_a_sqlite_path_that_is_no_database_gets_a_file_hint_not_a_server_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, make: object, problem: str
) -> None:
    path = tmp_path / "thing.db"
    make(path)  # type: ignore[operator]
    target = path if path.exists() else tmp_path / "missing" / "x.db"
    assert main(["sessions", "list", "--url", f"sqlite:///{target}"]) == EXIT_USAGE
    line = one_error(capsys)
    assert problem in line and "server" not in line


def test_an_unreadable_sqlite_file_gets_a_file_hint(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "dir.db").mkdir()
    assert main(["db", "upgrade", "--url", f"sqlite:///{tmp_path / 'dir.db'}"]) == (
        EXIT_UNAVAILABLE
    )
    line = one_error(capsys)
    assert "names a SQLite database file" in line and "server is running" not in line


def test_copy_errors_name_its_own_options(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path
) -> None:
    missing = f"sqlite:///{tmp_path / 'none.db'}"
    assert main(["copy", "--from", missing, "--to", db]) == EXIT_SCHEMA
    line = one_error(capsys)
    assert "pass --from" in line and "--url," not in line
    unreachable = "postgresql://agent@127.0.0.1:1/nowhere"
    assert main(["copy", "--from", db, "--to", unreachable]) == EXIT_UNAVAILABLE
    line = one_error(capsys)
    assert "(--from / --to)" in line and "--url" not in line


def test_db_upgrade_of_a_private_in_memory_database_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["db", "upgrade", "--url", "sqlite://"]) == EXIT_USAGE
    assert "private in-memory database" in one_error(capsys)


def test_tables_made_with_create_all_get_the_stamp_hint(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'made.db'}"
    engine = create_engine(url)
    metadata.create_all(engine)
    engine.dispose()
    assert main(["sessions", "list", "--url", url]) == EXIT_SCHEMA
    line = one_error(capsys)
    assert "no revision is recorded" in line and "agentledger db stamp" in line
    assert main(["db", "stamp", "--url", url]) == EXIT_OK


def test_configure_sqlite_engine_takes_the_async_engine_the_hint_names(tmp_path: Path) -> None:
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'borrowed.db'}")
    configure_sqlite_engine(engine)

    async def use() -> bool:
        async with AsyncLedger(engine=engine) as ledger:
            await ledger.upgrade()
            return await ledger.sessions.exists("x")

    assert asyncio.run(use()) is False
    asyncio.run(engine.dispose())
