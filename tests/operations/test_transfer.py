"""Export, import and copy: every row and value survives, twice changes nothing,
conflicts are reported and never overwrite, broken files are refused by line."""

from __future__ import annotations

import gzip
import io
import itertools
import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import URL

from agentledger import Ledger, SessionSelection, ValidationError, migrations
from agentledger.retention import PurgePolicy
from agentledger.transfer import FORMAT_VERSION

from ..databases import dialect_params, scratch_database
from ._data import counts, ledger_at, populate, snapshot


def _migrated_sqlite(tmp_path: Path, name: str) -> str:
    url = f"sqlite:///{tmp_path / name}"
    migrations.upgrade(url)
    return url


@pytest.fixture
def source(tmp_path: Path) -> str:
    url = _migrated_sqlite(tmp_path, "source.db")
    with ledger_at(url) as ledger:
        populate(ledger)
    return url


def _export(url: URL | str, path: Path) -> None:
    with ledger_at(url) as ledger:
        ledger.transfer.export_jsonl(path)


def _import(url: URL | str, path: Path) -> None:
    with ledger_at(url) as ledger:
        report = ledger.transfer.import_jsonl(path)
    assert report.conflict_count == 0


@pytest.mark.sqlite
@pytest.mark.postgresql
@pytest.mark.mysql
def test_round_trip_sqlite_postgresql_mariadb_sqlite_keeps_every_row_and_value(
    source: str, tmp_path: Path
) -> None:
    expected = snapshot(source)
    with (
        scratch_database("postgresql", str(tmp_path)) as postgres,
        scratch_database("mysql", str(tmp_path)) as mariadb,
    ):
        final = _migrated_sqlite(tmp_path, "final.db")
        migrations.upgrade(postgres)
        migrations.upgrade(mariadb)
        hops = [source, postgres, mariadb, final]
        for index, (here, there) in enumerate(itertools.pairwise(hops)):
            file = tmp_path / f"hop-{index}.jsonl"
            _export(here, file)
            _import(there, file)
            assert snapshot(there) == expected, f"after the hop into {there}"


def test_a_round_trip_through_a_file_reproduces_every_row(source: str, tmp_path: Path) -> None:
    target = _migrated_sqlite(tmp_path, "target.db")
    _export(source, tmp_path / "out.jsonl")

    _import(target, tmp_path / "out.jsonl")

    assert snapshot(target) == snapshot(source)
    assert counts(snapshot(target)) == {
        "agentledger_sessions": 5,
        "agentledger_messages": 5,
        "agentledger_steps": 8,
        "agentledger_grants": 2,
        "agentledger_checkpoints": 3,
        "agentledger_app_state": 1,
        "agentledger_user_state": 1,
        "agentledger_langgraph_checkpoints": 2,
        "agentledger_langgraph_blobs": 3,
        "agentledger_langgraph_writes": 2,
        "agentledger_memory_items": 2,
    }


@pytest.mark.parametrize("dialect", dialect_params())
def test_importing_twice_changes_nothing(source: str, tmp_path: Path, dialect: str) -> None:
    file = tmp_path / "out.jsonl"
    _export(source, file)
    with scratch_database(dialect, str(tmp_path)) as target:
        migrations.upgrade(target)
        _import(target, file)
        before = snapshot(target)

        with ledger_at(target) as ledger:
            again = ledger.transfer.import_jsonl(file)

        assert snapshot(target) == before
    assert again.inserted == 0
    assert {name: c.unchanged for name, c in again.tables.items()} == {
        "sessions": 5,
        "messages": 5,
        "steps": 8,
        "grants": 2,
        "checkpoints": 3,
        "app_states": 1,
        "user_states": 1,
        **{"langgraph_checkpoints": 2, "langgraph_blobs": 3, "langgraph_writes": 2},
        "memory_items": 2,
    }


@pytest.mark.parametrize("dialect", dialect_params())
def test_a_conflicting_row_is_reported_and_the_stored_one_kept(
    source: str, tmp_path: Path, dialect: str
) -> None:
    file = tmp_path / "out.jsonl"
    _export(source, file)
    with scratch_database(dialect, str(tmp_path)) as target:
        migrations.upgrade(target)
        _import(target, file)
        with ledger_at(target) as ledger:
            record = ledger.sessions.get("s-many-1")
            ledger.sessions.save(record.model_copy(update={"title": "changed here"}))
        before = snapshot(target)

        with ledger_at(target) as ledger:
            report = ledger.transfer.import_jsonl(file)
            assert ledger.sessions.get("s-many-1").title == "changed here"

        assert snapshot(target) == before
    assert report.conflict_count == 1
    (conflict,) = report.conflicts
    assert conflict.kind == "session"
    assert conflict.key == "session 's-many-1'"
    assert set(conflict.columns) == {"title", "updated_at", "revision"}
    assert conflict.line is not None
    assert report.tables["messages"].skipped == 1  # the conflicting session's rows
    assert report.tables["steps"].skipped == 2


def test_a_conflicting_child_row_is_reported_alone(source: str, tmp_path: Path) -> None:
    file = tmp_path / "out.jsonl"
    _export(source, file)
    lines = file.read_text(encoding="utf-8").splitlines()
    edited = []
    for line in lines:
        value = json.loads(line)
        if (
            "step" in value
            and value["step"]["session_id"] == "s-many-2"
            and value["step"]["seq"] == 2
        ):
            value["step"]["step_index"] = 99
        edited.append(json.dumps(value, ensure_ascii=False))
    other = tmp_path / "edited.jsonl"
    other.write_text("\n".join(edited) + "\n", encoding="utf-8")
    target = _migrated_sqlite(tmp_path, "target.db")
    _import(target, file)

    with ledger_at(target) as ledger:
        report = ledger.transfer.import_jsonl(other)

    assert [(c.key, c.columns) for c in report.conflicts] == [
        ("step ('s-many-2', 2)", ["step_index"])
    ]
    assert snapshot(target) == snapshot(source)


def test_an_import_adds_what_is_missing_and_keeps_what_is_there(
    source: str, tmp_path: Path
) -> None:
    """A partial target (the rows of one session gone) is completed, nothing duplicated."""
    file = tmp_path / "out.jsonl"
    _export(source, file)
    target = _migrated_sqlite(tmp_path, "target.db")
    _import(target, file)
    with ledger_at(target) as ledger:
        ledger.sessions.delete("s-rich")

    with ledger_at(target) as ledger:
        report = ledger.transfer.import_jsonl(file)

    assert snapshot(target) == snapshot(source)
    assert report.tables["sessions"].inserted == 1
    assert report.tables["sessions"].unchanged == 4


def test_export_of_one_session_or_a_user_holds_only_their_rows(source: str, tmp_path: Path) -> None:
    with ledger_at(source) as ledger:
        one = ledger.transfer.export_jsonl(
            tmp_path / "one.jsonl", selection=SessionSelection(session_ids=["s-rich"])
        )
        user = ledger.transfer.export_jsonl(
            tmp_path / "user.jsonl", selection=SessionSelection(user_id="user-2")
        )

    assert one.rows == {
        **{"sessions": 1, "messages": 2, "steps": 2, "grants": 2, "checkpoints": 3},
        **{"app_states": 0, "user_states": 0},  # none when sessions are chosen by id
        **{"langgraph_checkpoints": 2, "langgraph_blobs": 3, "langgraph_writes": 2},
        "memory_items": 0,  # memories belong to no session
    }
    assert user.rows == {
        **{"sessions": 3, "messages": 3, "steps": 6, "grants": 0, "checkpoints": 0},
        **{"app_states": 0, "user_states": 1},  # the user's state, not the app's
        **{"langgraph_checkpoints": 0, "langgraph_blobs": 0, "langgraph_writes": 0},
        "memory_items": 0,  # nor to a user's sessions
    }
    kinds = [next(iter(json.loads(line))) for line in (tmp_path / "user.jsonl").open()]
    assert kinds[0] == "agentledger_export" and kinds[-1] == "end"
    assert all(
        json.loads(line).get("session", {}).get("user_id", "user-2") == "user-2"
        for line in (tmp_path / "user.jsonl").open()
    )


def test_every_line_of_an_export_is_one_json_object_in_order(source: str, tmp_path: Path) -> None:
    with ledger_at(source) as ledger:
        stream = io.StringIO()
        ledger.transfer.export_jsonl(stream, batch=2)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    header = lines[0]["agentledger_export"]
    assert header["version"] == 4
    assert header["schema_revision"] == migrations.head()
    assert header["source"] == "sqlite"
    seen_sessions: set[str] = set()
    for line in lines[1:-1]:
        ((kind, row),) = line.items()
        if kind == "session":
            seen_sessions.add(row["id"])
        elif kind in ("app_state", "user_state", "memory_item"):
            assert seen_sessions == {"s-rich", "s-empty", "s-many-0", "s-many-1", "s-many-2"}
        else:
            assert row["session_id"] in seen_sessions, "a row before its session"
    assert lines[-1] == {
        "end": {
            **{"sessions": 5, "messages": 5, "steps": 8, "grants": 2, "checkpoints": 3},
            **{"app_states": 1, "user_states": 1},
            **{"langgraph_checkpoints": 2, "langgraph_blobs": 3, "langgraph_writes": 2},
            "memory_items": 2,
        }
    }
    step = next(line["step"] for line in lines if "step" in line and line["step"]["run_id"])
    assert step["started_at"] == "2026-01-02T14:05:06.000007Z"  # +14:00 read back as UTC
    assert step["input_tokens"] == 2**62


def test_a_gzip_export_imports(source: str, tmp_path: Path) -> None:
    file = tmp_path / "out.jsonl.gz"
    _export(source, file)
    with gzip.open(file, "rt") as unzipped:
        assert unzipped.readline().startswith('{"agentledger_export"')
    target = _migrated_sqlite(tmp_path, "target.db")

    _import(target, file)

    assert snapshot(target) == snapshot(source)


def test_a_file_cut_short_imports_nothing(source: str, tmp_path: Path) -> None:
    file = tmp_path / "out.jsonl"
    with ledger_at(source) as ledger:
        ledger.transfer.export_jsonl(file, batch=1)  # one session per page
    lines = file.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:-3]), encoding="utf-8")
    target = _migrated_sqlite(tmp_path, "target.db")

    with ledger_at(target) as ledger, pytest.raises(ValidationError, match="cut short"):
        ledger.transfer.import_jsonl(cut)

    assert all(rows == [] for rows in snapshot(target).values())


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "line 2: not JSON"),
        ('{"session": {"id": "x"}}', "line 2: session has missing column"),
        ('{"spaceship": {}}', "line 2: unknown kind 'spaceship'"),
        ('{"message": {}}', "line 2: a message before any session"),
    ],
)
def test_a_bad_line_is_refused_naming_it(tmp_path: Path, line: str, message: str) -> None:
    file = tmp_path / "bad.jsonl"
    file.write_text('{"agentledger_export": {"version": 1}}\n' + line + "\n", encoding="utf-8")
    target = _migrated_sqlite(tmp_path, "target.db")

    with ledger_at(target) as ledger, pytest.raises(ValidationError, match=message):
        ledger.transfer.import_jsonl(file)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("id", "../etc", "line 2: session.id: invalid id"),
        ("state", [1], "state must be a JSON object"),
        ("created_at", "2026-01-01T00:00:00", "has no UTC offset"),
        ("message_count", True, "must be an integer"),
        ("input_tokens", 2**63, "must be an integer that fits"),
        ("title", "x" * 513, "over the limit of 512"),
        ("title", "nul\x00", "NUL"),
    ],
)
def test_a_row_that_breaks_the_rules_is_refused_before_any_write(
    source: str, tmp_path: Path, field: str, value: object, message: str
) -> None:
    stream = io.StringIO()
    with ledger_at(source) as ledger:
        ledger.transfer.export_jsonl(stream, selection=SessionSelection(session_ids=["s-empty"]))
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    lines[1]["session"][field] = value
    file = tmp_path / "bad.jsonl"
    file.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    target = _migrated_sqlite(tmp_path, "target.db")

    with ledger_at(target) as ledger, pytest.raises(ValidationError, match=message):
        ledger.transfer.import_jsonl(file)

    assert counts(snapshot(target))["agentledger_sessions"] == 0


def _memory_lines(source: str) -> list[dict[str, Any]]:
    """The export of ``source`` as parsed lines (its memory items among them)."""
    stream = io.StringIO()
    with ledger_at(source) as ledger:
        ledger.transfer.export_jsonl(stream)
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_memory_item_stored_otherwise_is_reported_and_the_stored_one_kept(
    source: str, tmp_path: Path
) -> None:
    file = tmp_path / "out.jsonl"
    _export(source, file)
    target = _migrated_sqlite(tmp_path, "target.db")
    _import(target, file)
    namespace = ("memories", "ädä.s", "50%")
    with ledger_at(target) as ledger:
        ledger.memory.put(namespace, "prefs ✓", {"changed": "here"})

        report = ledger.transfer.import_jsonl(file)

        assert ledger.memory.get(namespace, "prefs ✓").value == {"changed": "here"}
    assert [(c.kind, c.key) for c in report.conflicts] == [
        ("memory_item", "memory_item ('memories.ädä%2Es.50%25', 'prefs ✓')")
    ]
    assert report.tables["memory_items"].unchanged == 1


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("namespace", "memories..ada", "labels cannot be"),
        ("namespace", "", "cannot be empty"),
        ("key", "k" * 256, "over the limit of 255"),
        ("key", "k ", "ends with a space"),
        ("namespace", "memories.ada\t", "not in its stored form"),
        ("value", [1], "must be a JSON object"),
        ("ttl_minutes", 0, "must be a number above 0"),
        ("embeddings", "AAAA", "one path per vector"),
        ("embedding_paths", None, "one path per vector"),
    ],
)
def test_a_memory_item_that_breaks_the_rules_is_refused_before_any_write(
    source: str, tmp_path: Path, field: str, value: object, message: str
) -> None:
    lines = _memory_lines(source)
    item = next(line["memory_item"] for line in lines if "memory_item" in line)
    if field in ("embeddings", "embedding_paths"):
        item = next(
            line["memory_item"]
            for line in lines
            if "memory_item" in line and line["memory_item"]["embeddings"]
        )
    item[field] = value
    file = tmp_path / "bad.jsonl"
    file.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    target = _migrated_sqlite(tmp_path, "target.db")

    with ledger_at(target) as ledger, pytest.raises(ValidationError, match=message):
        ledger.transfer.import_jsonl(file)

    assert counts(snapshot(target))["agentledger_memory_items"] == 0


def test_a_newer_format_is_refused_with_what_to_do(tmp_path: Path) -> None:
    file = tmp_path / "new.jsonl"
    newer = FORMAT_VERSION + 1
    file.write_text(f'{{"agentledger_export": {{"version": {newer}}}}}\n', encoding="utf-8")
    target = _migrated_sqlite(tmp_path, "target.db")

    with ledger_at(target) as ledger, pytest.raises(ValidationError, match="upgrade agentledger"):
        ledger.transfer.import_jsonl(file)


def test_a_file_that_is_not_an_export_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "other.jsonl"
    file.write_text('{"hello": 1}\n', encoding="utf-8")
    target = _migrated_sqlite(tmp_path, "target.db")

    with (
        ledger_at(target) as ledger,
        pytest.raises(ValidationError, match="not an agentledger export"),
    ):
        ledger.transfer.import_jsonl(file)


def test_an_export_to_a_named_pipe_writes_into_it_and_leaves_it_a_pipe(
    source: str, tmp_path: Path
) -> None:
    pipe = tmp_path / "out.pipe"
    os.mkfifo(pipe)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_bytes()), daemon=True)
    reader.start()

    _export(source, pipe)
    reader.join(timeout=30)

    assert stat.S_ISFIFO(os.stat(pipe).st_mode)
    lines = received[0].decode().splitlines()
    assert "agentledger_export" in json.loads(lines[0]) and "end" in json.loads(lines[-1])
    assert list(tmp_path.glob("out.pipe.*")) == []


def test_an_interrupted_export_leaves_no_file_behind(source: str, tmp_path: Path) -> None:
    file = tmp_path / "out.jsonl"

    def stop(_progress: object) -> None:
        raise KeyboardInterrupt

    with ledger_at(source) as ledger, pytest.raises(KeyboardInterrupt):
        ledger.transfer.export_jsonl(file, progress=stop)

    assert list(tmp_path.glob("out.jsonl*")) == []


def test_copy_refuses_to_copy_a_database_onto_itself(source: str) -> None:
    with (
        ledger_at(source) as one,
        Ledger(source) as same,
        pytest.raises(ValidationError, match="same database"),
    ):
        one.transfer.copy_to(same)


@pytest.mark.parametrize("dialect", dialect_params("postgresql"))
def test_export_import_copy_and_purge_work_in_a_postgresql_schema(
    source: str, tmp_path: Path, dialect: str
) -> None:
    file = tmp_path / "out.jsonl"
    _export(source, file)
    with scratch_database(dialect, str(tmp_path)) as url:
        migrations.upgrade(url, schema="ledger_a")
        migrations.upgrade(url, schema="ledger_b")
        with Ledger(url, schema="ledger_a") as a, Ledger(url, schema="ledger_b") as b:
            assert a.transfer.import_jsonl(file).inserted == 34
            assert a.transfer.copy_to(b).inserted == 34
            stream = io.StringIO()
            assert b.transfer.export_jsonl(stream).rows["steps"] == 8
            assert b.retention.purge(PurgePolicy(keep_checkpoints=0)).checkpoints == 3
            assert b.sessions.get("s-rich").latest_checkpoint_ref is None
            assert a.sessions.get("s-rich").latest_checkpoint_ref is not None
