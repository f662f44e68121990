"""The environment variables an operator sets: one table (``agentledger.environment``),
which the help lists and each option names; an option wins over its variable; an empty
variable is unset; a malformed one is a usage error naming it."""

from __future__ import annotations

import argparse
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentledger import Ledger, environment, migrations
from agentledger.cli import EXIT_ERROR, EXIT_OK, EXIT_USAGE, _parser, main
from agentledger.cli import common as cli_common
from agentledger.engine import DEFAULT_LOCK_TIMEOUT_S
from agentledger.environment import (
    DATABASE_URL,
    LOCK_TIMEOUT,
    SCHEMA,
    STATEMENT_TIMEOUT,
    UI_TOKEN,
    VARIABLES,
)

from ._output import one_error


def _words(text: str) -> str:
    return " ".join(text.split())


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[Any]:
    """Every command's parser with its words (``("sessions", "show")``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield (*path, name), child
                yield from _commands(child, (*path, name))


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for variable in VARIABLES:
        monkeypatch.delenv(variable.name, raising=False)
    url = f"sqlite:///{tmp_path / 'env.db'}"
    migrations.upgrade(url)
    with Ledger(url) as ledger:
        ledger.sessions.create("one")
    return url


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The keywords of every Ledger the command line opens."""
    seen: list[dict[str, Any]] = []

    def spy(url: str, **options: Any) -> Ledger:
        seen.append(options)
        return Ledger(url, **options)

    monkeypatch.setattr(cli_common, "Ledger", spy)
    return seen


# --- the table and the help ---------------------------------------------------------------


def test_the_help_lists_every_variable_with_its_meaning_default_and_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--help"]) == EXIT_OK

    help = _words(capsys.readouterr().out)
    for variable in VARIABLES:
        assert variable.name in help
        assert _words(f"{variable.meaning}; default {variable.default}") in help
        if variable.option is not None:
            assert f"option {variable.option}" in help


def test_every_option_of_a_variable_names_it_in_the_command_s_help() -> None:
    by_option = {variable.option: variable for variable in VARIABLES if variable.option}
    checked = set()
    for words, parser in _commands(_parser()):
        help = _words(parser.format_help())
        for action in parser._actions:
            for option in action.option_strings:
                if option in by_option:
                    assert f"${by_option[option].name}" in help, (words, option)
                    checked.add(option)
    assert checked == set(by_option)


def test_the_viewer_reads_the_token_variable_of_the_table() -> None:
    from agentledger.ui import TOKEN_ENV

    assert UI_TOKEN.name == TOKEN_ENV


def test_the_lock_timeout_default_is_the_ledger_s() -> None:
    assert float(LOCK_TIMEOUT.default) == DEFAULT_LOCK_TIMEOUT_S


def test_the_markdown_table_has_a_row_per_variable() -> None:
    rows = environment.markdown_table().splitlines()[2:]
    assert [row.split("`")[1] for row in rows] == [variable.name for variable in VARIABLES]


# --- the URL --------------------------------------------------------------------------------


def test_a_malformed_url_variable_is_a_usage_error_naming_it(
    db: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(DATABASE_URL.name, "nonsense://x")

    assert main(["sessions", "list"]) == EXIT_USAGE
    line = one_error(capsys.readouterr().err)
    assert "AGENTLEDGER_DATABASE_URL: unsupported database 'nonsense'" in line


def test_the_url_option_wins_over_a_malformed_url_variable(
    db: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(DATABASE_URL.name, "nonsense://x")
    assert main(["sessions", "list", "--url", db]) == EXIT_OK
    assert "one" in capsys.readouterr().out


# --- the schema -----------------------------------------------------------------------------


def test_a_schema_variable_off_postgresql_is_a_usage_error_naming_it(
    db: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(SCHEMA.name, "agents")

    assert main(["sessions", "list", "--url", db]) == EXIT_USAGE
    line = one_error(capsys.readouterr().err)
    assert "AGENTLEDGER_SCHEMA='agents': the schema option is only available on PostgreSQL" in line
    assert line.endswith("; or unset it")


def test_an_invalid_schema_variable_is_a_usage_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(SCHEMA.name, "bad-name")

    assert main(["db", "sql", "--url", "postgresql://"]) == EXIT_USAGE
    assert "AGENTLEDGER_SCHEMA='bad-name': invalid schema name" in one_error(
        capsys.readouterr().err
    )


def test_the_schema_variable_reaches_the_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(SCHEMA.name, "agents")

    assert main(["db", "sql", "--url", "postgresql://"]) == EXIT_OK
    assert "agents.agentledger_sessions" in capsys.readouterr().out


def test_the_schema_option_wins_over_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(SCHEMA.name, "bad-name")

    assert main(["db", "sql", "--url", "postgresql://", "--schema", "tenant_1"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "tenant_1.agentledger_sessions" in out and "bad-name" not in out


def test_an_empty_schema_variable_counts_as_unset(
    db: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(SCHEMA.name, "")
    assert main(["sessions", "list", "--url", db]) == EXIT_OK


# --- the timeouts ---------------------------------------------------------------------------


def test_the_timeout_variables_reach_the_ledger(
    db: str, monkeypatch: pytest.MonkeyPatch, opened: list[dict[str, Any]]
) -> None:
    monkeypatch.setenv(LOCK_TIMEOUT.name, "2.5")
    monkeypatch.setenv(STATEMENT_TIMEOUT.name, "30")

    assert main(["sessions", "list", "--url", db]) == EXIT_OK
    assert opened[0]["lock_timeout"] == 2.5 and opened[0]["statement_timeout"] == 30


def test_the_timeout_options_win_over_the_variables(
    db: str, monkeypatch: pytest.MonkeyPatch, opened: list[dict[str, Any]]
) -> None:
    monkeypatch.setenv(LOCK_TIMEOUT.name, "soon")
    monkeypatch.setenv(STATEMENT_TIMEOUT.name, "30")
    command = ["export", "--url", db, "-o", "-", "--lock-timeout", "1", "--statement-timeout", "9"]

    assert main(command) == EXIT_OK
    assert opened[0]["lock_timeout"] == 1 and opened[0]["statement_timeout"] == 9


def test_without_timeouts_the_ledger_keeps_its_defaults(
    db: str, opened: list[dict[str, Any]]
) -> None:
    assert main(["sessions", "show", "one", "--url", db]) == EXIT_OK
    assert opened[0]["lock_timeout"] is None and opened[0]["statement_timeout"] is None


def test_a_copy_gives_both_ledgers_the_timeouts(
    db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opened: list[dict[str, Any]]
) -> None:
    target = f"sqlite:///{tmp_path / 'target.db'}"
    migrations.upgrade(target)
    monkeypatch.setenv(LOCK_TIMEOUT.name, "4")

    assert main(["copy", "--from", db, "--to", target]) == EXIT_OK
    assert [options["lock_timeout"] for options in opened] == [4, 4]


@pytest.mark.parametrize("value", ["soon", "0", "-1", "nan", "inf", "86401"])
def test_a_malformed_timeout_variable_is_a_usage_error_naming_it(
    value: str, db: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(STATEMENT_TIMEOUT.name, value)

    assert main(["sessions", "list", "--url", db]) == EXIT_USAGE
    line = one_error(capsys.readouterr().err)
    assert f"AGENTLEDGER_STATEMENT_TIMEOUT={value!r}: takes a number of seconds above 0" in line


def test_a_malformed_timeout_option_is_a_usage_error(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["purge", "--url", db, "--older-than", "1d", "--lock-timeout", "soon"]) == 2
    assert "argument --lock-timeout: 'soon': takes a number of seconds" in capsys.readouterr().err


def test_the_lock_timeout_variable_bounds_the_wait_for_a_locked_database(
    db: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    holder = sqlite3.connect(db.removeprefix("sqlite:///"))
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the database's write lock
    monkeypatch.setenv(LOCK_TIMEOUT.name, "0.2")
    try:
        started = time.monotonic()
        assert main(["sessions", "delete", "one", "--url", db]) == EXIT_ERROR
        waited = time.monotonic() - started
    finally:
        holder.rollback()
        holder.close()
    assert waited < DEFAULT_LOCK_TIMEOUT_S / 3
    one_error(capsys.readouterr().err)
