"""A ledger full of awkward values, and a snapshot of every row of every table."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from sqlalchemy import Table, create_engine, select
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger import Ledger, RunSummary
from agentledger.models import metadata
from agentledger.models.types import JSONDocument, json_text

PLUS_14 = timezone(timedelta(hours=14))
START = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
AWKWARD: dict[str, Any] = {
    "unicode": 'héllo wörld — 日本語 🌍 \u2028 "quoted" \\ tab\t',
    "negative_zero": -0.0,
    "fraction": 0.1,
    "big": 2**63 - 1,
    "bigger": -(2**70),
    "nested": {"list": [1, [2, [3, {"deep": None}]]], "empty": {}, "flags": [True, False]},
}
STATE: dict[str, Any] = {"plan": ["a", "b"], "ünïcode": "✓", "huge": 2**70, "neg": -5}
"""Session state is JSONB on PostgreSQL, whose numbers have no -0.0: the state keeps to
values JSONB stores exactly."""


class Clock:
    """A clock that moves 1.000001 s per reading, so every stamp has microseconds."""

    def __init__(self, start: datetime = START) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1, microseconds=1)
        return self.now


@contextmanager
def ledger_at(url: URL | str, clock: Clock | None = None) -> Iterator[Ledger]:
    ledger = Ledger(url, clock=clock or Clock())
    try:
        yield ledger
    finally:
        ledger.close()


def populate(ledger: Ledger, *, prefix: str = "s") -> None:
    """Sessions covering every column: unicode, big ints, -0.0, times with offsets,
    replaced conversations (seq gaps), grants with expiry, checkpoints with lineage,
    external keys; app and user state; memory items (a dotted label, vectors, a TTL)."""
    rich = ledger.sessions.create(
        f"{prefix}-rich",
        app_name="app.one",
        user_id="user-1",
        title="Tïtle 🌍",
        model="m-1",
        state=STATE,
        external_key=f"thread ✓ {prefix}",
    )
    rich = ledger.messages.append(
        rich,
        [
            {"role": "user", "content": "Plan the trip ✈️", "metadata": {"k": -0.0}},
            {"role": "assistant", "content": AWKWARD, "metadata": AWKWARD},
            {"role": "tool", "content": None},
        ],
    ).session
    rich = ledger.messages.replace(rich, [{"role": "user", "content": [{"text": "compacted"}]}])
    at = datetime(2026, 1, 3, 4, 5, 6, 7, tzinfo=PLUS_14)
    after = {"role": "assistant", "content": "after the replace", "external_key": "item ✓"}
    ledger.messages.append(rich, [{**after, "created_at": at}])
    ledger.steps.append(
        f"{prefix}-rich",
        [
            {
                "step_index": 0,
                "kind": "model",
                "run_id": "run-1",
                "model": "m-1",
                "input": AWKWARD,
                "output": {"text": "ok"},
                "tool_calls": [{"id": "c1", "name": "search"}],
                "usage": {
                    "input_tokens": 2**62,
                    "output_tokens": 1,
                    "total_tokens": 2**62 + 1,
                    "extra": {"cached": 2**62},
                },
                "started_at": at,
                "ended_at": at + timedelta(microseconds=1),
            },
            {
                "step_index": 0,
                "kind": "tool",
                "name": "search",
                "error": "tïmeout\nline 2",
                "external_key": "call ✓",
            },
        ],
    )
    ledger.app_state.merge("app.one", {"set": {"k": STATE}})  # JSONB too, like STATE
    ledger.user_state.merge("app.two", "user-2", {"set": {"n": 2**62, "ü": [True, None]}})
    memories = ("memories", f"ädä.{prefix}", "50%")  # a dot and a percent in labels
    ledger.memory.put(memories, "prefs ✓", {"k": STATE, "nested": AWKWARD["nested"]})
    ledger.memory.put(
        memories,
        "vectors",
        {"text": "trains"},
        text="likes trains",
        ttl_minutes=60 * 24 * 3650.5,
        embeddings=[("text", [0.25, -1.5, 3.0]), ("text", [1e-3, 0.0, -0.0])],
    )
    ledger.grants.grant(f"{prefix}-rich", "tool:search", granted_by="ünïcode user")
    ledger.grants.grant(
        f"{prefix}-rich", "shell:rm -rf /tmp/x ✓", expires_at=START + timedelta(days=365)
    )
    with ledger.unit_of_work() as uow:
        first = uow.checkpoints.save(f"{prefix}-rich", {"runtime_state": AWKWARD})
        second = uow.checkpoints.save(
            f"{prefix}-rich", {"runtime_state": {"n": 2}}, ttl=timedelta(days=3650)
        )
        uow.checkpoints.fork(f"{prefix}-rich", first.ref, {"pending_interrupts": [-0.0]})
        assert second.parent_ref == first.ref
    ledger.sessions.finalize(
        f"{prefix}-rich",
        RunSummary(status="interrupted", model="m-1", error="wäiting", usage={"input_tokens": 3}),
    )
    _langgraph_thread(ledger, f"thread ✓ {prefix}")
    ledger.sessions.create(f"{prefix}-empty")
    for index in range(3):
        id = f"{prefix}-many-{index}"
        ledger.sessions.create(id, user_id="user-2", app_name="app.two")
        ledger.messages.append(id, [{"role": "user", "content": f"hello {index}"}])
        ledger.steps.append(id, [{"kind": "model", "step_index": i} for i in range(index + 1)])


def _langgraph_thread(ledger: Ledger, thread: str) -> None:
    """LangGraph rows on the rich session (its key is the thread id): two checkpoints in
    two namespaces, every byte value in a blob, an empty channel, a special write."""
    threads = ledger.langgraph(app_name="app.one", user_id="user-1")
    threads.put(
        thread,
        "",
        "cp-1",
        parent_checkpoint_id=None,
        checkpoint=("msgpack", bytes(range(256))),
        channel_versions={"a": "1", "b": "1"},
        metadata={"source": "loop", "step": 1, "ü": STATE},
        blobs=[("a", "1", ("bytes", b"\x00\xff" * 100)), ("b", "1", None)],
    )
    threads.put(
        thread,
        "sub:ns ✓",
        "cp-2",
        parent_checkpoint_id="cp-1",
        checkpoint=("json", b"{}"),
        channel_versions={"c": "00000000000000000000000000000001.0.5"},
        metadata={"run_id": "run-1"},
        blobs=[("c", "00000000000000000000000000000001.0.5", ("msgpack", b""))],
    )
    writes = [(0, "a", ("json", b"[1]")), (-3, "__interrupt__", ("msgpack", b"\x01"))]
    threads.put_writes(thread, "", "cp-1", "task ✓", writes, task_path="~__pregel_pull, a")


Snapshot = dict[str, list[dict[str, Any]]]
_SURROGATE = {"agentledger_messages", "agentledger_steps", "agentledger_grants"}


def snapshot(url: URL | str) -> Snapshot:
    """Every row of every agentledger table (surrogate ids left out), JSON columns as
    canonical text so -0.0, 1 and 1.0 stay apart, sorted by natural key."""
    engine = create_engine(url, poolclass=NullPool)
    result: Snapshot = {}
    try:
        with engine.connect() as connection:
            for table in metadata.sorted_tables:
                result[table.name] = _rows(connection, table)
    finally:
        engine.dispose()
    return result


def _rows(connection: Any, table: Table) -> list[dict[str, Any]]:
    columns = [
        json_text(c).label(c.name) if isinstance(c.type, type(JSONDocument())) else c
        for c in table.c
        if not (table.name in _SURROGATE and c.name == "id")
    ]
    rows = []
    for row in connection.execute(select(*columns)):
        values = dict(row._mapping)
        for column in table.c:
            if isinstance(column.type, type(JSONDocument())) and values[column.name] is not None:
                decoded = json.loads(values[column.name])
                values[column.name] = json.dumps(decoded, sort_keys=True, ensure_ascii=False)
        rows.append(values)
    return sorted(rows, key=lambda values: json.dumps(values, sort_keys=True, default=str))


def counts(data: Snapshot) -> dict[str, int]:
    return {name: len(rows) for name, rows in data.items()}
