"""The export's line order is what docs/command-line.md and ``Transfer``'s docstring describe."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path

from agentledger import Ledger, NewMessage, NewStep


def test_an_export_holds_sessions_then_their_rows_then_scoped_state_then_the_end(
    tmp_path: Path,
) -> None:
    with Ledger(f"sqlite:///{tmp_path / 'order.db'}") as ledger:
        ledger.upgrade()
        for id in ("a", "b"):
            record = ledger.sessions.create(id, app_name="app", user_id="u")
            ledger.messages.append(record, NewMessage(role="user", content="hi"))
            ledger.steps.append(id, NewStep())
            ledger.grants.grant(id, "tool:x")
            ledger.checkpoints.save(id, {})
        ledger.app_state.merge("app", {"set": {"k": 1}})
        out = io.StringIO()
        ledger.transfer.export_jsonl(out)
    kinds = [next(iter(json.loads(line))) for line in out.getvalue().splitlines()]
    assert [kind for kind, _ in itertools.groupby(kinds)] == [
        "agentledger_export",
        "session",
        "message",
        "step",
        "grant",
        "checkpoint",
        "app_state",
        "end",
    ]
