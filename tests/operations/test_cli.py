"""The operating commands: their output, exit codes and one-line errors."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentledger import RunSummary, migrations
from agentledger.cli import (
    EXIT_CONFLICTS,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_SCHEMA,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    main,
)

from ._data import Clock, ledger_at, snapshot
from ._output import one_error

T0 = datetime(2026, 3, 2, 9, 15, 0, tzinfo=UTC)


def _fill(url: str) -> None:
    clock = Clock(T0)
    with ledger_at(url, clock) as ledger:
        old = ledger.sessions.create(
            "support-0042", app_name="helpdesk", user_id="alice", title="Printer offline"
        )
        ledger.messages.append(old, [{"role": "user", "content": "The printer is offline."}])
        ledger.steps.append(
            "support-0042",
            {
                "kind": "model",
                "model": "m-small",
                "usage": {"input_tokens": 310, "total_tokens": 352},
            },
        )
        clock.now += timedelta(days=45)
        trip = ledger.sessions.create("trip-lisbon", app_name="travel", user_id="alice")
        ledger.messages.append(
            trip,
            [
                {"role": "user", "content": "Plan 3 days in Lisbon.\x1b[31m"},
                {"role": "assistant", "content": {"text": "Day 1: Alfama."}},
            ],
        )
        ledger.steps.append(
            "trip-lisbon",
            [
                {
                    "kind": "model",
                    "model": "m-big",
                    "usage": {"input_tokens": 1200, "total_tokens": 1500},
                },
                {"kind": "tool", "name": "weather.forecast", "error": "timed out"},
            ],
        )
        ledger.grants.grant("trip-lisbon", "tool:weather.forecast", granted_by="alice")
        with ledger.unit_of_work() as uow:
            uow.checkpoints.save("trip-lisbon", {"runtime_state": {"phase": "plan"}})
        ledger.sessions.finalize("trip-lisbon", RunSummary(status="interrupted", model="m-big"))
        ledger.sessions.create("bugfix-431", user_id="bob", title="Fix flaky CI")


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    migrations.upgrade(url)
    _fill(url)
    return url


@pytest.fixture
def empty(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    migrations.upgrade(url)
    return url


# --- sessions ------------------------------------------------------------------------------


def test_sessions_list_is_a_table_newest_first(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sessions", "list", "--url", db]) == EXIT_OK

    out, err = capsys.readouterr()
    lines = out.splitlines()
    header = ["ID", "KEY", "TITLE", "STATUS", "STEPS", "TOKENS", "UPDATED", "(UTC)"]
    assert lines[0].split() == header
    assert [line.split()[0] for line in lines[1:]] == ["bugfix-431", "trip-lisbon", "support-0042"]
    assert "Plan 3 days in Lisbon." in lines[2]  # no title: the opening message
    assert "interrupted" in lines[2] and "1,500" in lines[2]
    assert err == ""


def test_sessions_list_filters_and_limits(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sessions", "list", "--url", db, "--user", "alice", "--limit", "1"]) == EXIT_OK
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [row.split()[0] for row in rows] == ["trip-lisbon"]

    assert main(["sessions", "list", "--url", db, "--status", "cancelled"]) == EXIT_OK
    assert capsys.readouterr().out == "no sessions\n"


def test_sessions_list_json_is_for_scripts(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sessions", "list", "--url", db, "--json", "--app", "travel"]) == EXIT_OK

    (item,) = json.loads(capsys.readouterr().out)
    assert item["id"] == "trip-lisbon" and item["total_tokens"] == 1500
    assert item["updated_at"].endswith("Z")


def test_sessions_list_json_of_nothing_is_an_empty_array(
    empty: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "list", "--url", empty, "--json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out) == []


def test_sessions_show_has_the_conversation_steps_grants_and_checkpoints(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "show", "trip-lisbon", "--url", db]) == EXIT_OK

    out = capsys.readouterr().out
    assert out.startswith("session   trip-lisbon\n")
    assert "status    interrupted    model -" in out
    assert "tokens    1,200 in, 0 out, 1,500 total" in out
    assert "conversation: 2 messages" in out
    assert "Plan 3 days in Lisbon.\\x1b[31m" in out  # escape sequences shown, not run
    assert '{"text": "Day 1: Alfama."}' in out
    assert "steps: 2" in out and "weather.forecast" in out and "timed out" in out
    assert "grants: 1 active" in out and "tool:weather.forecast  alice" in out
    assert "checkpoints: 1 unexpired shown" in out and " *" in out
    assert "\x1b" not in out


def test_sessions_show_of_an_unknown_id_is_one_error_line(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "show", "nope", "--url", db]) == EXIT_ERROR
    assert "no session 'nope'" in one_error(capsys.readouterr().err)


def test_sessions_delete_removes_the_session_and_its_rows(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "delete", "trip-lisbon", "--url", db]) == EXIT_OK

    assert capsys.readouterr().out.startswith("deleted session trip-lisbon (2 messages, 2 steps")
    rows = snapshot(db)
    assert {row["id"] for row in rows["agentledger_sessions"]} == {"support-0042", "bugfix-431"}
    assert all(row["session_id"] != "trip-lisbon" for row in rows["agentledger_steps"])


# --- export, import, copy --------------------------------------------------------------------


def test_export_to_a_file_says_what_it_wrote(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "backup.jsonl"
    assert main(["export", "--url", db, "-o", str(file)]) == EXIT_OK

    out, err = capsys.readouterr()
    assert out == (
        "exported 3 sessions, 3 messages, 3 steps, 1 grant, 1 checkpoint, "
        "0 langgraph_checkpoints, 0 langgraph_blobs, 0 langgraph_writes, 0 app_states, "
        f"0 user_states, 0 memory_items to {file}\n"
    )
    assert err == ""  # no progress: stderr is not a terminal
    assert json.loads(file.read_text().splitlines()[-1])["end"]["sessions"] == 3


def test_export_to_stdout_keeps_stdout_for_the_data(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", "--url", db, "--session", "bugfix-431"]) == EXIT_OK

    out, err = capsys.readouterr()
    lines = [json.loads(line) for line in out.splitlines()]
    assert list(lines[0]) == ["agentledger_export"]
    assert [list(line) for line in lines[1:]] == [["session"], ["end"]]
    assert err.startswith("exported 1 session, 0 messages")


def test_export_to_a_dash_writes_stdout_not_a_file_named_dash(
    db: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["export", "--url", db, "--session", "bugfix-431", "-o", "-"]) == EXIT_OK

    out, _ = capsys.readouterr()
    assert list(json.loads(out.splitlines()[0])) == ["agentledger_export"]
    assert not (tmp_path / "-").exists()


def test_import_twice_then_a_conflict_exits_5(
    db: str, empty: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "backup.jsonl"
    main(["export", "--url", db, "-o", str(file)])
    capsys.readouterr()

    assert main(["import", str(file), "--url", empty]) == EXIT_OK
    first = capsys.readouterr().out.splitlines()
    assert first[0].split() == ["INSERTED", "UNCHANGED", "CONFLICTING", "SKIPPED"]
    assert first[1].split() == ["sessions", "3", "0", "0", "0"]

    assert main(["import", str(file), "--url", empty]) == EXIT_OK
    assert capsys.readouterr().out.splitlines()[3].split() == ["steps", "0", "3", "0", "0"]

    with ledger_at(empty) as ledger:
        record = ledger.sessions.get("bugfix-431")
        ledger.sessions.save(record.model_copy(update={"title": "edited"}))
    assert main(["import", str(file), "--url", empty]) == EXIT_CONFLICTS
    out, err = capsys.readouterr()
    assert out.splitlines()[1].split() == ["sessions", "0", "2", "1", "0"]
    assert err.strip().splitlines() == [
        "agentledger: conflict: line 2: session 'bugfix-431' is stored with other title, "
        "updated_at, revision; the stored row was kept"
    ]


def test_import_reads_stdin(
    db: str,
    empty: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    file = tmp_path / "backup.jsonl"
    main(["export", "--url", db, "-o", str(file)])
    capsys.readouterr()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(file.read_bytes())))

    assert main(["import", "-", "--url", empty]) == EXIT_OK
    assert snapshot(empty) == snapshot(db)


def test_import_of_a_broken_file_names_the_line(
    empty: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "bad.jsonl"
    file.write_text('{"agentledger_export": {"version": 1}}\n{"session": 3}\n')

    assert main(["import", str(file), "--url", empty]) == EXIT_USAGE
    assert "line 2: a session must be a JSON object" in one_error(capsys.readouterr().err)


def test_copy_moves_everything_and_can_run_again(
    db: str, empty: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["copy", "--from", db, "--to", empty]) == EXIT_OK
    assert capsys.readouterr().out.splitlines()[1].split() == ["sessions", "3", "0", "0", "0"]
    assert main(["copy", "--from", db, "--to", empty]) == EXIT_OK
    assert capsys.readouterr().out.splitlines()[1].split() == ["sessions", "0", "3", "0", "0"]
    assert snapshot(empty) == snapshot(db)


def test_copy_to_a_file_that_does_not_exist_says_how_to_create_it(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = f"sqlite:///{tmp_path / 'new.db'}"

    assert main(["copy", "--from", db, "--to", target]) == EXIT_SCHEMA
    line = one_error(capsys.readouterr().err)
    assert "no SQLite database at" in line and "agentledger db upgrade --url" in line
    assert not (tmp_path / "new.db").exists()


def test_copy_onto_itself_is_a_usage_error(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["copy", "--from", db, "--to", db]) == EXIT_USAGE
    assert "same database" in one_error(capsys.readouterr().err)


# --- purge ---------------------------------------------------------------------------------


def test_purge_dry_run_lists_and_changes_nothing_then_purge_deletes_it(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(db)
    # The data is from 2026-03/04 and "now" is the wall clock: pick an age between them.
    age = (datetime.now(UTC) - (T0 + timedelta(days=20))).days
    command = ["purge", "--url", db, "--older-than", f"{age}d"]

    assert main([*command, "--dry-run"]) == EXIT_OK
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("session     support-0042  older_than  updated 2026-03-02T09:15")
    assert "1 message, 1 step  Printer offline" in out[0]
    assert out[-1] == (
        "dry run: would delete 1 session (1 message, 1 step) and 0 checkpoints; nothing was changed"
    )
    assert snapshot(db) == before

    assert main([*command, "--verbose"]) == EXIT_OK
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("session     support-0042")
    assert out[-1] == "deleted 1 session (1 message, 1 step) and 0 checkpoints"
    assert {row["id"] for row in snapshot(db)["agentledger_sessions"]} == {
        "trip-lisbon",
        "bugfix-431",
    }


def test_purge_of_checkpoints_and_vacuum(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["purge", "--url", db, "--keep-checkpoints", "0", "--vacuum"]) == EXIT_OK
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "deleted 0 sessions (0 messages, 0 steps) and 1 checkpoint"
    assert out[1].startswith("vacuum: the file went from ")
    assert snapshot(db)["agentledger_checkpoints"] == []


def test_purge_of_expired_memories_lists_then_deletes_them(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Written two hours ago by the ledger's clock, for one minute: expired now.
    clock = Clock(datetime.now(UTC) - timedelta(hours=2))
    with ledger_at(db, clock) as ledger:
        ledger.memory.put(("memories", "ada"), "food", {"likes": "soup"}, ttl_minutes=1)
        ledger.memory.put(("memories", "ada"), "kept", {"likes": "trains"})
    command = ["purge", "--url", db, "--expired-memories"]

    assert main([*command, "--dry-run"]) == EXIT_OK
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("memory      memories/ada food  expired  written ")
    assert out[-1] == (
        "dry run: would delete 0 sessions (0 messages, 0 steps), 0 checkpoints and "
        "1 memory item; nothing was changed"
    )
    assert main(command) == EXIT_OK
    assert capsys.readouterr().out.splitlines()[-1] == (
        "deleted 0 sessions (0 messages, 0 steps), 0 checkpoints and 1 memory item"
    )
    assert [row["key"] for row in snapshot(db)["agentledger_memory_items"]] == ["kept"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ([], "say what to purge"),
        (["--expired-memories", "--user", "ada"], "leave out --user and --app"),
        (["--older-than", "30 days"], "expected a duration such as 30d"),
        (["--older-than", "30d", "--dry-run", "--vacuum"], "leave it out of a --dry-run"),
        (["--keep-checkpoints", "-1"], "keep_checkpoints must be an int from 0"),
    ],
)
def test_purge_usage_errors(
    db: str, capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    assert main(["purge", "--url", db, *arguments]) == EXIT_USAGE
    assert message in one_error(capsys.readouterr().err)


# --- errors and progress ---------------------------------------------------------------------


def test_a_bad_url_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sessions", "list", "--url", "nonsense://x"]) == EXIT_USAGE
    assert "unsupported database 'nonsense'" in one_error(capsys.readouterr().err)


def test_an_unreachable_database_exits_4_with_a_hint(capsys: pytest.CaptureFixture[str]) -> None:
    url = "postgresql://agent:s3cret@127.0.0.1:1/ledger"
    assert main(["sessions", "list", "--url", url]) == EXIT_UNAVAILABLE
    line = one_error(capsys.readouterr().err)
    assert "cannot reach the database" in line and "agent:***@127.0.0.1:1" in line
    assert "s3cret" not in line
    assert "to fix: check that the database server is running" in line


def test_a_schema_behind_the_package_exits_3_naming_the_upgrade(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    migrations.upgrade(url, "agentledger_0001")

    assert main(["export", "--url", url]) == EXIT_SCHEMA
    line = one_error(capsys.readouterr().err)
    assert "behind" in line and "agentledger db upgrade --url" in line


def test_no_sqlite_file_is_created_by_a_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTLEDGER_DATABASE_URL", raising=False)

    assert main(["sessions", "list"]) == EXIT_SCHEMA
    assert "no SQLite database at agentledger.db" in one_error(capsys.readouterr().err)
    assert not (tmp_path / "agentledger.db").exists()


def test_the_url_comes_from_the_environment(
    db: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AGENTLEDGER_DATABASE_URL", db)
    assert main(["sessions", "list", "--limit", "1"]) == EXIT_OK
    assert "bugfix-431" in capsys.readouterr().out


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_drawn_only_on_a_terminal(
    db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr("agentledger.cli.output.time.monotonic", iter(range(0, 10_000, 5)).__next__)

    assert main(["export", "--url", db, "-o", str(tmp_path / "x.jsonl")]) == EXIT_OK

    drawn = terminal.getvalue()
    assert "\rexport: " in drawn and "rows" in drawn and "%" in drawn
    assert drawn.endswith("\r\x1b[K")  # the line is cleared before the summary
    assert capsys.readouterr().out.startswith("exported 3 sessions")


@pytest.mark.slow
def test_a_real_process_exports_and_imports_through_a_pipe(db: str, empty: str) -> None:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    env.pop("AGENTLEDGER_DATABASE_URL", None)
    command = [sys.executable, "-m", "agentledger"]
    exported = subprocess.run(
        [*command, "export", "--url", db], capture_output=True, env=env, check=True, timeout=60
    )
    imported = subprocess.run(
        [*command, "import", "-", "--url", empty],
        input=exported.stdout,
        capture_output=True,
        env=env,
        timeout=60,
    )
    listed = subprocess.run(
        [*command, "sessions", "list", "--url", empty],
        capture_output=True,
        env=env,
        text=True,
        timeout=60,
    )

    assert exported.stderr.decode().startswith("exported 3 sessions")
    assert imported.returncode == EXIT_OK, imported.stderr
    assert imported.stderr == b""
    assert listed.returncode == EXIT_OK
    assert listed.stdout.splitlines()[1].split()[0] == "bugfix-431"
    assert snapshot(empty) == snapshot(db)
