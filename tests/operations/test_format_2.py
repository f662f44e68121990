"""Export format 2: the external keys and the app and user state travel; a format 1
file (written before them) still imports."""

from __future__ import annotations

import json
from pathlib import Path

from agentledger.transfer import FORMAT_VERSION

from ._data import ledger_at

AT = "2026-01-02T03:04:05.000006Z"
V1_SESSION = {
    "id": "old",
    "app_name": "app",
    "user_id": "ana",
    "title": None,
    "model": None,
    "status": "active",
    "state": {"k": 1},
    "message_count": 1,
    "message_seq": 1,
    "step_count": 0,
    "checkpoint_seq": 0,
    "input_tokens": 0,
    "output_tokens": 0,
    "total_tokens": 0,
    "last_run": None,
    "latest_checkpoint_ref": None,
    "preview": "hi",
    "created_at": AT,
    "updated_at": AT,
    "revision": 4,
}
V1_MESSAGE = {
    "session_id": "old",
    "seq": 1,
    "role": "user",
    "content": "hi",
    "metadata": {},
    "created_at": AT,
}


def _lines(*items: dict[str, object]) -> str:
    return "".join(json.dumps(item) + "\n" for item in items)


def test_the_format_is_version_4_with_memory_items_after_3() -> None:
    assert FORMAT_VERSION == 4


def test_a_version_1_file_imports_with_no_external_keys(tmp_path: Path) -> None:
    file = tmp_path / "v1.jsonl"
    file.write_text(
        _lines(
            {"agentledger_export": {"version": 1}},
            {"session": V1_SESSION},
            {"message": V1_MESSAGE},
            {"end": {"sessions": 1, "messages": 1, "steps": 0, "grants": 0, "checkpoints": 0}},
        )
    )
    with ledger_at(f"sqlite:///{tmp_path / 'target.db'}") as ledger:
        ledger.upgrade()
        report = ledger.transfer.import_jsonl(file)
        session = ledger.sessions.get("old")
        (message,) = ledger.messages.all("old")
    assert report.tables["sessions"].inserted == 1
    assert (session.revision, session.external_key, message.external_key) == (4, None, None)


def test_keys_and_scoped_state_survive_a_round_trip(tmp_path: Path) -> None:
    file = tmp_path / "out.jsonl"
    with ledger_at(f"sqlite:///{tmp_path / 'source.db'}") as source:
        source.upgrade()
        session = source.sessions.create(external_key="thread ✓", user_id="ana@example.com")
        source.messages.append(session, {"role": "user", "content": "x", "external_key": "m1"})
        source.app_state.merge("app", {"set": {"theme": "dark"}})
        source.user_state.merge("app", "ana@example.com", {"set": {"seat": "window"}})
        source.transfer.export_jsonl(file)
    with ledger_at(f"sqlite:///{tmp_path / 'target.db'}") as target:
        target.upgrade()
        target.transfer.import_jsonl(file)
        again = target.transfer.import_jsonl(file)
        found = target.sessions.get_by_key("thread ✓", user_id="ana@example.com")
        (message,) = target.messages.all(found.id)
        app = target.app_state.get("app")
        user = target.user_state.get("app", "ana@example.com")
    assert found.id == session.id and message.external_key == "m1"
    assert (app.state, app.revision, user.state) == ({"theme": "dark"}, 1, {"seat": "window"})
    assert again.inserted == 0 and again.tables["user_states"].unchanged == 1
