"""`agentledger db ...`: exit codes, one-line errors, no passwords, a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL

from agentledger import migrations
from agentledger.cli import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_SCHEMA,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    main,
)
from agentledger.engine import URL_ENV
from agentledger.errors import DatabaseLockedError
from agentledger.models import VERSION_TABLE

from ._support import OUR_TABLES, our_table_names

HEAD = migrations.head()


def _url(url: URL) -> str:
    return url.render_as_string(hide_password=False)


@pytest.fixture
def sqlite_file(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'cli.db'}"


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("agentledger: error: ")
    assert "Traceback" not in err
    return lines[0]


def test_upgrade_creates_the_tables_and_says_where_it_is(
    scratch_url: URL, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "upgrade", "--url", _url(scratch_url)]) == EXIT_OK

    assert f"is at {HEAD} (head)" in capsys.readouterr().out
    assert our_table_names(scratch_url) == OUR_TABLES | {VERSION_TABLE}


def test_upgrade_says_which_revisions_it_applied_and_then_that_none_were_left(
    sqlite_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "upgrade", "agentledger_0002", "--url", sqlite_file]) == EXIT_OK
    assert "applied agentledger_0001, agentledger_0002\n" in capsys.readouterr().out
    assert main(["db", "upgrade", "--url", sqlite_file]) == EXIT_OK
    pending = [each.revision for each in migrations.history()][2:]
    assert f"applied {', '.join(pending)}\n" in capsys.readouterr().out
    assert main(["db", "upgrade", "--url", sqlite_file]) == EXIT_OK
    assert capsys.readouterr().out.startswith("nothing to apply\n")


def test_history_lists_every_shipped_revision_with_its_deploy_kind(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["db", "history"]) == EXIT_OK
    out = capsys.readouterr().out
    listed = [line.split()[0] for line in out.splitlines() if not line.startswith(" ")]
    assert listed == [each.revision for each in migrations.history()]
    assert f"{HEAD} (head)  EXPAND  " in out
    assert all(each.deploy in ("EXPAND", "CONTRACT") and each.note for each in migrations.history())


def test_an_upgrade_logs_each_revision_it_applies(
    sqlite_file: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("INFO", logger="agentledger.migrations"):
        applied = migrations.upgrade(sqlite_file)
        again = migrations.upgrade(sqlite_file)
    assert applied == tuple(each.revision for each in migrations.history()) and again == ()
    messages = [r.getMessage() for r in caplog.records if r.name == "agentledger.migrations"]
    assert [m.split()[2] for m in messages[:-1]] == list(applied)
    assert messages[-1].endswith(f"is at {HEAD}: nothing to apply")


def test_check_exits_0_at_head(scratch_url: URL, capsys: pytest.CaptureFixture[str]) -> None:
    migrations.upgrade(scratch_url)

    assert main(["db", "check", "--url", _url(scratch_url)]) == EXIT_OK
    assert HEAD in capsys.readouterr().out


def test_check_exits_3_when_missing_naming_the_revision_and_the_command(
    scratch_url: URL, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "check", "--url", _url(scratch_url)]) == EXIT_SCHEMA

    line = _one_error_line(capsys.readouterr().err)
    assert "missing" in line and HEAD in line and "agentledger db upgrade --url" in line


def test_check_exits_3_when_behind_naming_both_revisions(
    scratch_url: URL, capsys: pytest.CaptureFixture[str]
) -> None:
    migrations.upgrade(scratch_url, "agentledger_0001")

    assert main(["db", "check", "--url", _url(scratch_url)]) == EXIT_SCHEMA

    line = _one_error_line(capsys.readouterr().err)
    assert "at agentledger revision agentledger_0001" in line and HEAD in line
    assert "agentledger db upgrade --url" in line


@pytest.mark.sqlite
def test_current_prints_the_revision_or_base(
    sqlite_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "current", "--url", sqlite_file]) == EXIT_OK
    assert capsys.readouterr().out.startswith("base")

    migrations.upgrade(sqlite_file)
    assert main(["db", "current", "--url", sqlite_file]) == EXIT_OK
    assert capsys.readouterr().out.strip() == f"{HEAD} (head)"


@pytest.mark.sqlite
def test_downgrade_to_base_drops_the_tables(
    sqlite_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrations.upgrade(sqlite_file)

    assert main(["db", "downgrade", "--url", sqlite_file, "base"]) == EXIT_OK

    assert "is at base" in capsys.readouterr().out
    assert migrations.current(sqlite_file) is None


@pytest.mark.sqlite
def test_the_url_comes_from_the_environment_then_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    from_env = tmp_path / "from-env.db"
    monkeypatch.setenv(URL_ENV, f"sqlite:///{from_env}")
    assert main(["db", "upgrade"]) == EXIT_OK
    assert migrations.current(f"sqlite:///{from_env}") == HEAD

    monkeypatch.delenv(URL_ENV)
    assert main(["db", "upgrade"]) == EXIT_OK
    assert (tmp_path / "agentledger.db").is_file()
    assert "sqlite:///agentledger.db is at" in capsys.readouterr().out


@pytest.mark.parametrize("dialect", ["postgresql", "mysql"])
def test_sql_prints_the_upgrade_without_a_server(
    dialect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "sql", "--url", f"{dialect}://nobody@192.0.2.1:1/none"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "CREATE TABLE agentledger_sessions (" in out
    assert f"INSERT INTO {VERSION_TABLE}" in out


def test_sql_from_a_revision(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "sql", "--url", "postgresql://", "--from", HEAD]) == EXIT_OK
    assert "CREATE TABLE" not in capsys.readouterr().out


def test_sql_refuses_sqlite_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "sql", "--url", "sqlite:///x.db"]) == EXIT_USAGE
    line = _one_error_line(capsys.readouterr().err)
    assert "not available for SQLite" in line


@pytest.mark.sqlite
def test_the_schema_option_off_postgresql_is_a_usage_error(
    sqlite_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "upgrade", "--url", sqlite_file, "--schema", "agents"]) == EXIT_USAGE
    assert "only available on PostgreSQL" in _one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    "argv",
    [
        ["db", "upgrade", "--url", "not a url"],
        ["db", "upgrade", "--url", "nonsense://scott@db/x"],
        ["db", "upgrade", "--url", "postgresql://", "--schema", "bad-name"],
    ],
)
def test_bad_input_is_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == EXIT_USAGE
    _one_error_line(capsys.readouterr().err)


@pytest.mark.sqlite
def test_an_unknown_revision_is_a_usage_error(
    sqlite_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "upgrade", "--url", sqlite_file, "agentledger_9999"]) == EXIT_USAGE
    assert "agentledger_9999" in _one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    "argv", [[], ["db"], ["db", "frobnicate"], ["db", "downgrade"], ["db", "upgrade", "--bogus"]]
)
def test_incomplete_commands_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == EXIT_USAGE
    assert "usage: agentledger" in capsys.readouterr().err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "upgrade", "--help"]) == EXIT_OK
    assert "--schema" in capsys.readouterr().out


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://agent:s3cret-pw@127.0.0.1:1/ledger",
        "mysql://agent:s3cret-pw@127.0.0.1:1/ledger",
    ],
)
def test_an_unreachable_database_exits_4_without_the_password(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "upgrade", "--url", url]) == EXIT_UNAVAILABLE

    captured = capsys.readouterr()
    line = _one_error_line(captured.err)
    assert "s3cret-pw" not in captured.err + captured.out
    assert "agent:***@127.0.0.1:1" in line


@pytest.mark.sqlite
def test_an_unopenable_sqlite_file_exits_4(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}"  # a folder, not a database file
    assert main(["db", "current", "--url", url]) == EXIT_UNAVAILABLE
    _one_error_line(capsys.readouterr().err)


@pytest.mark.sqlite
@pytest.mark.parametrize("where", ["missing.db", "no-such-dir/missing.db"])
def test_db_current_on_a_missing_sqlite_file_creates_nothing(
    tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / where
    assert main(["db", "current", "--url", f"sqlite:///{path}"]) == 0
    assert "absent" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


@pytest.mark.sqlite
def test_db_check_on_a_missing_sqlite_file_exits_3_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "missing.db"
    assert main(["db", "check", "--url", f"sqlite:///{path}"]) == 3
    err = capsys.readouterr().err
    assert "no SQLite database file" in err and "db upgrade" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.sqlite
def test_a_database_newer_than_the_package_exits_3(
    sqlite_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrations.upgrade(sqlite_file)
    engine = create_engine(sqlite_file)
    with engine.begin() as connection:
        connection.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = 'agentledger_9999'"))
    engine.dispose()

    assert main(["db", "check", "--url", sqlite_file]) == EXIT_SCHEMA
    assert "upgrade the agentledger package" in _one_error_line(capsys.readouterr().err)


@pytest.mark.sqlite
def test_other_agentledger_errors_exit_1(
    sqlite_file: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def locked(*_: object, **__: object) -> None:
        raise DatabaseLockedError("another agentledger migration held the lock for 600 s")

    monkeypatch.setattr(migrations, "upgrade", locked)

    assert main(["db", "upgrade", "--url", sqlite_file]) == EXIT_ERROR
    assert "held the lock" in _one_error_line(capsys.readouterr().err)


def _console_script() -> Path:
    script = Path(sys.executable).parent / ("agentledger.exe" if os.name == "nt" else "agentledger")
    if not script.exists():
        pytest.skip(f"the agentledger console script is not installed next to {sys.executable}")
    return script


@pytest.mark.sqlite
def test_the_installed_console_script_upgrades_a_sqlite_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'subprocess.db'}"
    env = {key: value for key, value in os.environ.items() if key != URL_ENV}

    done = subprocess.run(
        [str(_console_script()), "db", "upgrade", "--url", url],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )

    assert done.returncode == EXIT_OK, done.stderr
    assert f"{HEAD} (head)" in done.stdout
    assert migrations.current(url) == HEAD
    check = subprocess.run(
        [str(_console_script()), "db", "check", "--url", f"sqlite:///{tmp_path / 'other.db'}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert check.returncode == EXIT_SCHEMA
    assert _one_error_line(check.stderr)
