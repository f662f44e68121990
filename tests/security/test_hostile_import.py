"""A hand-edited export, or a source database holding what the target cannot store, is
refused whole, naming the line or the row: import and copy check every row by the
API's rules (and each session's counters against its rows) and write nothing of a
refused file or copy, on every database."""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.engine import URL

from agentledger import Ledger, NewMessage, NewStep, ValidationError
from agentledger.models import AgentMessage

_ids = itertools.count()
Edit = Callable[[list[dict[str, Any]]], None]


@pytest.fixture(scope="module")
def target(migrated_url: URL) -> Iterator[Ledger]:
    with Ledger(migrated_url) as ledger:
        yield ledger


def export_of(tmp_path: Path, sessions: int = 1) -> tuple[list[str], list[dict[str, Any]]]:
    """The ids and lines (decoded) of an export of ``sessions`` sessions, each with two
    messages, a step and a checkpoint."""
    ids = [f"imp-{next(_ids)}" for _ in range(sessions)]
    with Ledger(f"sqlite:///{tmp_path / f'source-{ids[0]}.db'}") as source:
        source.upgrade()
        for id in ids:
            record = source.sessions.create(id, state={"k": 1})
            source.messages.append(record, [NewMessage(role="user", content=c) for c in "ab"])
            source.steps.append(id, NewStep(model="m"))
            source.checkpoints.save(id, {})
        out = io.StringIO()
        source.transfer.export_jsonl(out, batch=1)
    return ids, [json.loads(line) for line in out.getvalue().splitlines()]


def edited(lines: list[dict[str, Any]], kind: str, **values: Any) -> list[dict[str, Any]]:
    """``lines`` with ``values`` set in the first line of ``kind``."""
    first = next(line for line in lines if kind in line)
    first[kind].update(values)
    return lines


def imported(ledger: Ledger, lines: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps(line) + "\n" for line in lines)
    ledger.transfer.import_jsonl(io.BytesIO(text.encode()), batch=1)


def refused(ledger: Ledger, ids: list[str], lines: list[dict[str, Any]], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        imported(ledger, lines)
    assert not any(ledger.sessions.exists(id) for id in ids), "a refused import left rows"


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"message_seq": 1}, "message_seq 1, but a message of it has seq 2"),
        ({"step_count": 0}, "step_count 0, but a step of it has seq 1"),
        ({"checkpoint_seq": 0}, "checkpoint_seq 0, but a checkpoint of it has seq 1"),
        ({"message_count": 3}, "message_count 3, but 2 message rows follow it"),
        ({"input_tokens": -1}, "session.input_tokens must be an integer"),
        ({"revision": -5}, "session.revision must be an integer"),
        ({"status": "hacked"}, "session.status must be one of active"),
        ({"last_run": {"status": "nope"}}, "session.last_run is not a RunSummary"),
        ({"state": {"big": 1e300}}, "1e16 or more"),
    ],
)
def test_a_session_line_breaking_a_rule_is_refused_naming_it(
    target: Ledger, tmp_path: Path, values: dict[str, Any], problem: str
) -> None:
    ids, lines = export_of(tmp_path)
    refused(target, ids, edited(lines, "session", **values), f"line 2: .*{problem}")


def test_a_message_row_added_to_a_session_is_refused(target: Ledger, tmp_path: Path) -> None:
    ids, lines = export_of(tmp_path)
    extra = json.loads(json.dumps(next(line for line in lines if "message" in line)))
    extra["message"]["seq"] = 3
    lines.insert(3, extra)
    lines[-1]["end"]["messages"] += 1
    refused(target, ids, lines, "message_seq 2, but a message of it has seq 3")


def test_negative_seqs_in_child_rows_are_refused(target: Ledger, tmp_path: Path) -> None:
    ids, lines = export_of(tmp_path)
    refused(target, ids, edited(lines, "step", seq=-1), "step.seq must be an integer")


def test_a_corrupt_line_in_a_later_page_leaves_the_earlier_pages_unwritten(
    target: Ledger, tmp_path: Path
) -> None:
    ids, lines = export_of(tmp_path, sessions=3)
    last_session = max(i for i, line in enumerate(lines) if "session" in line)
    lines[last_session]["session"]["created_at"] = "yesterday"
    refused(target, ids, lines, f"line {last_session + 1}: .*not an ISO 8601 time")


def test_wrong_end_line_counts_leave_nothing_written(target: Ledger, tmp_path: Path) -> None:
    ids, lines = export_of(tmp_path, sessions=2)
    lines[-1]["end"]["steps"] = 7
    refused(target, ids, lines, "nothing of it was imported")


def test_state_imports_in_the_form_the_api_stores(target: Ledger, tmp_path: Path) -> None:
    ids, lines = export_of(tmp_path)
    imported(target, edited(lines, "session", state={"bb": -0.0, "a": 1}))
    state = target.sessions.get(ids[0]).state
    assert list(state) == ["a", "bb"] and str(state["bb"]) == "0.0"


def test_an_imported_session_takes_appends_afterwards(target: Ledger, tmp_path: Path) -> None:
    ids, lines = export_of(tmp_path)
    imported(target, lines)
    appended = target.messages.append(ids[0], NewMessage(role="user", content="c"))
    assert [message.seq for message in appended.messages] == [3]
    assert [step.seq for step in target.steps.append(ids[0], NewStep())] == [2]


def test_a_copy_of_a_value_too_deep_for_any_database_writes_nothing_and_names_the_row(
    target: Ledger, tmp_path: Path
) -> None:
    deep: Any = 1
    for _ in range(32):
        deep = [deep]
    with Ledger(f"sqlite:///{tmp_path / 'deep.db'}") as source:
        source.upgrade()
        ids = [source.sessions.create(f"deep-{next(_ids)}").id for _ in range(2)]
        for id in ids:
            source.messages.append(id, NewMessage(role="user", content="shallow"))
        with source.engine.begin() as connection:  # written by something else than the API
            connection.execute(
                update(AgentMessage).where(AgentMessage.session_id == ids[1]).values(content=deep)
            )
        with pytest.raises(ValidationError, match=rf"row \('{ids[1]}', 1\).*deeper than 31"):
            source.transfer.copy_to(target, batch=1)
    assert not any(target.sessions.exists(id) for id in ids)
