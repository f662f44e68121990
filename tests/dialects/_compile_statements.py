"""Capture every statement agentledger's repositories send, and compile each for other
dialects: run by ``test_compiled_dialects.py`` in a process of its own.

The process must be started with ``AGENTLEDGER_PROFILE=portable`` (read once, when
agentledger is imported): the statements are then those SQLAlchemy's ORM and Core give
on any dialect, the ones agentledger would send to a database it has no fast path for.
A scenario of every repository operation runs on a temporary SQLite file, a
``before_execute`` listener keeps each construct sent, and each is compiled with every
dialect named on the command line. One JSON report is printed on stdout.

    AGENTLEDGER_PROFILE=portable python tests/dialects/_compile_statements.py oracle mssql
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from sqlalchemy import String, event
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.ddl import ExecutableDDLElement
from sqlalchemy.sql.dml import Delete, Insert, Update
from sqlalchemy.sql.elements import TextClause
from sqlalchemy.sql.selectable import Select
from sqlalchemy.types import NullType

DIALECTS: dict[str, Callable[[], Dialect]] = {}


def _oracle() -> Dialect:
    from sqlalchemy.dialects import oracle

    return cast(Dialect, oracle.dialect())  # type: ignore[no-untyped-call]


def _mssql() -> Dialect:
    from sqlalchemy.dialects import mssql

    # As when connected to SQL Server 2012 or later: VARCHAR(max), not TEXT.
    return cast(Dialect, mssql.dialect(deprecate_large_types=True))  # type: ignore[no-untyped-call]


def _cockroachdb() -> Dialect:
    from sqlalchemy_cockroachdb.psycopg2 import (  # type: ignore[import-untyped]
        CockroachDBDialect_psycopg2,
    )

    return cast(Dialect, CockroachDBDialect_psycopg2())


DIALECTS = {"oracle": _oracle, "mssql": _mssql, "cockroachdb": _cockroachdb}


def scenario(ledger: Any) -> Iterator[str]:
    """Every repository operation, once or in each of its shapes; yields the name of
    each step as it begins, so a failure names it."""
    from agentledger import (
        CheckpointPayload,
        NewMessage,
        NewStep,
        PendingToolCall,
        PurgePolicy,
        RunSummary,
        SessionSelection,
        TokenUsage,
    )
    from agentledger.repositories.langgraph import repository as langgraph_repository

    now = datetime.now(UTC)
    later = now + timedelta(days=1)
    everything = SessionSelection()
    some = SessionSelection(
        session_ids=["s1", "s3"], app_name="app", user_id="ada", updated_since=now - timedelta(1)
    )
    sessions, messages, steps = ledger.sessions, ledger.messages, ledger.steps
    yield "sessions"
    session = sessions.create("s1", app_name="app", user_id="ada", title="A trip")
    sessions.get("s1")
    sessions.get_or_none("missing")
    sessions.exists("s1")
    sessions.get_or_create("s2", app_name="app", user_id="ada")
    sessions.get_or_create("s2")
    keyed, _ = sessions.get_or_create_by_key("thread-1", app_name="app", user_id="bob")
    sessions.get_or_create_by_key("thread-1", app_name="app", user_id="bob")
    sessions.get_by_key("thread-1", app_name="app", user_id="bob")
    sessions.get_by_key_or_none("thread-9", app_name="app", user_id="bob")
    session = sessions.save(session.model_copy(update={"state": {"turns": 1}}))
    for include in ((), ("external_key", "state", "last_message_at")):
        sessions.list(app_name="app", user_id="ada", status="active", include=include)
    page = sessions.list(limit=1)
    sessions.list(limit=1, cursor=page.next_cursor)
    sessions.list(id_prefix="s", search="trip")
    sessions.list(external_key="thread-1")
    sessions.most_recent(user_id="ada")

    yield "messages"
    asked = messages.append(session, NewMessage(role="user", content="Which museums?"))
    messages.append(
        "s1",
        [
            NewMessage(role="assistant", content={"text": "Two"}, metadata={"k": 1}),
            NewMessage(role="tool", content="x", external_key="call-1"),
        ],
        state_delta={"set": {"seen": True}},
        app_state_delta={"set": {"a": 1}},
        user_state_delta={"set": {"u": 1}, "delete": ["x"]},
    )
    messages.append("s1", NewMessage(role="tool", content="x", external_key="call-1"))
    messages.last("s1", 2)
    messages.window("s1", after_seq=1, limit=10)
    messages.since("s1", now - timedelta(hours=1), last=5)
    messages.since("s1", now - timedelta(hours=1))
    messages.before("s1", later, last=5)
    messages.before("s1", later)
    messages.conversation("s1", last=2)
    messages.conversation("s1")
    messages.all("s1")
    messages.pop("s1", 1)
    replaced = messages.replace(sessions.get("s1"), [NewMessage(role="user", content="again")])
    messages.append(replaced, NewMessage(role="user", content="more"))
    del asked

    yield "steps"
    usage = TokenUsage(input_tokens=40, output_tokens=12, total_tokens=52)
    steps.append("s1", NewStep(kind="model", model="demo", usage=usage, run_id="r1"))
    steps.append(
        "s1",
        [
            NewStep(kind="tool", name="search", input={"q": 1}, output="ok", external_key="t1"),
            NewStep(kind="tool", name="search", external_key="t2"),
        ],
    )
    steps.append("s1", NewStep(kind="tool", name="search", external_key="t2"))
    steps.last("s1", 2)
    steps.window("s1", after_seq=0, limit=10)
    steps.by_run("s1", "r1")
    steps.by_kind("s1", "tool")
    list(steps.iterate("s1", batch=1))
    steps.count("s1")
    steps.usage(session_id="s1", user_id="ada", model="demo", since=now - timedelta(1))
    steps.usage(until=later)
    for by in ("day", "model", "user"):
        steps.usage_by(by, since=now - timedelta(1), until=later, user_id="ada")
        steps.usage_by(by)

    yield "sessions.finalize and overview"
    sessions.finalize("s1", RunSummary(status="completed", model="demo", usage=usage))
    sessions.overview("s1")

    yield "grants"
    ledger.grants.grant("s1", "tool:search", granted_by="ada")
    ledger.grants.grant("s1", "tool:search", granted_by="ada", expires_at=later)
    ledger.grants.is_granted("s1", "tool:search")
    ledger.grants.active("s1")
    ledger.grants.revoke("s1", "tool:search")
    ledger.grants.grant("s1", "tool:other")
    ledger.grants.revoke("s1")

    yield "checkpoints"
    call = {"id": "c1", "name": "search"}
    payload = CheckpointPayload(
        context_window=messages.last("s1", 2),
        pending_tool_calls={"c1": PendingToolCall(tool_call=call, interrupt_active=True)},
        runtime_state={"turn": 1},
    )
    first = ledger.checkpoints.save("s1", payload)
    second = ledger.checkpoints.save("s1", payload, parent=first.ref)
    ledger.checkpoints.save("s1", payload, ttl=timedelta(microseconds=1))
    sessions.create("s3", app_name="app", user_id="ada")
    ledger.checkpoints.fork("s1", second.ref, payload, ttl=timedelta(days=1))
    ledger.checkpoints.latest("s1")
    ledger.checkpoints.get(first.ref)
    listed = ledger.checkpoints.list("s1", limit=1)
    ledger.checkpoints.list("s1", limit=1, cursor=listed.next_cursor)
    sessions.with_checkpoints(everything)
    sessions.with_checkpoints(some, after="s0", limit=10)
    ledger.checkpoints.prunable(["s1", "s3"], 2, at=later)
    ledger.checkpoints.prune("s1", keep_last=2)
    ledger.checkpoints.prune_sessions(["s1", "s3"], 1, at=later)
    expired = ledger.checkpoints.expired(everything, at=later)
    ledger.checkpoints.expired(some, at=later, after=(now, "x"), limit=10)
    ledger.checkpoints.delete_expired([info.ref for info in expired], at=later)
    ledger.checkpoints.purge_expired()
    ledger.checkpoints.delete(ledger.checkpoints.save("s3", payload).ref)
    ledger.checkpoints.delete_all("s3")

    yield "app_state and user_state"
    app = ledger.app_state.get("app")
    ledger.app_state.save(app.model_copy(update={"state": {"a": 2}}))
    ledger.app_state.merge("app", {"set": {"b": 2}})
    ledger.app_state.merge("other", {"set": {"b": 2}})
    ledger.app_state.delete("app")
    user = ledger.user_state.get("app", "ada")
    ledger.user_state.save(user.model_copy(update={"state": {"a": 2}}))
    ledger.user_state.merge("app", "ada", {"set": {"b": 2}})
    ledger.user_state.merge("app", "eve", {"set": {"b": 2}})
    ledger.user_state.delete("app", "ada")

    yield "memory"
    memory = ledger.memory
    memory.put(("memories", "ada"), "k1", {"likes": "museums", "n": 1}, text="Museums open")
    memory.put(
        ("memories", "ada"),
        "k2",
        {"likes": "trains"},
        ttl_minutes=5,
        embeddings=[("likes", [0.1, 0.2, 0.3])],
    )
    memory.put(("memories", "ada"), "k1", {"likes": "art"}, expected_revision=1)
    memory.put(("memories", "ada"), "k3", {"x": True}, expected_revision=0)
    memory.put(("memories", "ada"), "k1", {"likes": "art"})
    memory.get(("memories", "ada"), "k1")
    memory.refresh([(("memories", "ada"), "k2")])
    memory.search(("memories",), filter={"likes": "art"}, limit=5, offset=1)
    memory.search(("memories",), query_vector=[0.1, 0.2, 0.3])
    memory.search(("memories",), words="museums open")
    memory.search()
    memory.list_namespaces(prefix=("memories",), suffix=("ada",), max_depth=2)
    memory.list_namespaces()
    memory.delete(("memories", "ada"), "k3", expected_revision=1)
    memory.delete(("memories", "ada"), "k2")
    memory.delete_all(("memories",), filter={"likes": "nothing"})
    gone = memory.expired(after=(now, ("memories",), "a"), limit=10)
    memory.delete_expired([(item.namespace, item.key) for item in gone])
    memory.expired()
    memory.delete_expired([(("memories", "ada"), "k1")])

    yield "langgraph"
    graph = ledger.langgraph()
    blobs = [("messages", "1", ("json", b"[]")), ("empty", "1", None)]
    for checkpoint_id, parent in (("0001", None), ("0002", "0001")):
        graph.put(
            "thread-1",
            "",
            checkpoint_id,
            parent_checkpoint_id=parent,
            checkpoint=("json", b"{}"),
            channel_versions={"messages": "1"},
            metadata={"run_id": "run-1", "step": 1},
            blobs=blobs,
        )
    graph.put_writes("thread-1", "", "0002", "task-1", [(0, "messages", ("json", b"1"))])
    graph.put_writes("thread-1", "", "0002", "task-1", [(-1, "__error__", ("json", b"2"))])
    graph.get("thread-1", "")
    # Pages of one row, so a listing's later pages (their keyset) are sent too.
    setattr(langgraph_repository, "PAGE", 1)  # noqa: B010
    graph.get("thread-1", "", "0001")
    list(graph.list("thread-1", checkpoint_ns="", before="0002", filter={"step": 1}, limit=2))
    list(graph.list(None, checkpoint_id="0002"))
    list(graph.list("thread-1"))
    graph.session_rows(keyed.id)
    graph.paused([keyed.id])
    graph.copy_thread("thread-1", "thread-2")
    graph.prune(["thread-1"])
    graph.delete_for_runs(["run-1"])
    graph.delete_thread("thread-2")

    yield "transfer"
    with tempfile.TemporaryDirectory() as folder:
        exported = Path(folder) / "export.jsonl"
        ledger.transfer.export_jsonl(exported)
        ledger.transfer.export_jsonl(exported, selection=some)
        sessions.delete("s3")
        ledger.transfer.import_jsonl(exported)

    yield "retention"
    policy = PurgePolicy(
        older_than=timedelta(days=30),
        expired_checkpoints=True,
        keep_checkpoints=1,
        expired_memories=True,
    )
    ledger.retention.plan_purge(policy)
    ledger.retention.purge(policy)
    ledger.retention.purge(PurgePolicy(older_than=timedelta(days=30), app_name="app"))

    yield "deletes"
    sessions.stale(everything)
    sessions.stale(some, after=(now, "s0"), limit=10)
    sessions.delete_stale(["s3"], updated_before=later)
    sessions.delete_by_key("thread-1", app_name="app", user_id="bob")
    sessions.delete("s2")


def kind_of(statement: object) -> str:
    """What a captured statement is: the report groups them by it."""
    for kind, cls in (
        ("insert", Insert),
        ("update", Update),
        ("delete", Delete),
        ("select", Select),
        ("text", TextClause),
        ("ddl", ExecutableDDLElement),
    ):
        if isinstance(statement, cls):
            return kind
    return "string" if isinstance(statement, str) else type(statement).__name__


def tables_of(statement: ClauseElement) -> list[str]:
    """The names of the tables a DML statement writes, or a SELECT reads from."""
    if isinstance(statement, Insert | Update | Delete):
        return [str(getattr(statement.table, "name"))]  # noqa: B009
    if isinstance(statement, Select):
        froms = statement.get_final_froms()
        return sorted({str(getattr(t, "name")) for t in froms if hasattr(t, "name")})  # noqa: B009
    return []


def parameter_keys(multiparams: Any, params: Any) -> list[str]:
    """The names of the parameters a statement was executed with (its first set)."""
    for found in (*(multiparams or ()), params):
        if isinstance(found, dict) and found:
            return [str(key) for key in found]
        if isinstance(found, list | tuple) and found and isinstance(found[0], dict):
            return [str(key) for key in found[0]]
    return []


def empty_strings(multiparams: Any, params: Any) -> set[str]:
    """The names of the parameters a statement was executed with whose value is the
    empty string (Oracle stores it as NULL)."""
    found: set[str] = set()
    for group in (*(multiparams or ()), params):
        for one in group if isinstance(group, list | tuple) else [group]:
            if isinstance(one, dict):
                found.update(str(key) for key, value in one.items() if value == "")
    return found


def sent_empty(
    statement: ClauseElement, keys: list[str], names: set[str], dialect: Dialect
) -> list[str]:
    """Those of ``names`` (parameters bound to ``''``; ``keys``: all of them) that
    ``dialect`` would still be sent as ``''`` after its column types' bind processing
    (Oracle stores it as NULL)."""
    if not names:
        return []
    processors = compiled_for(statement, dialect, keys)._bind_processors
    return sorted(name for name in names if name not in processors or processors[name]("") == "")


def read_without_stand_in(statement: ClauseElement, keys: list[str], dialect: Dialect) -> list[str]:
    """The result columns of ``statement`` named as a column that stores ``''`` as a
    stand-in on ``dialect`` (``models.types.ORACLE_EMPTY``) whose type would not read it
    back as ``''`` there (an untyped NULL heading a UNION's column, say)."""
    from agentledger.models import metadata
    from agentledger.models.types import ORACLE_EMPTY

    kept = {
        column.name
        for table in metadata.tables.values()
        for column in table.c
        if _stores_stand_in(column, dialect)
    }
    found = []
    for entry in getattr(compiled_for(statement, dialect, keys), "_result_columns", None) or []:
        if entry.keyname not in kept or not isinstance(entry.type, String | NullType):
            continue  # another table's column of that name, an integer id say
        processor = entry.type._cached_result_processor(dialect, None)
        if processor is None or processor(ORACLE_EMPTY) != "":
            found.append(entry.keyname)
    return sorted(set(found))


def _stores_stand_in(column: Any, dialect: Dialect) -> bool:
    if not isinstance(column.type, String):
        return False
    processor = column.type._cached_bind_processor(dialect)
    return processor is not None and processor("") != ""


def compiled_for(statement: ClauseElement, dialect: Dialect, keys: list[str]) -> Any:
    """``statement`` compiled by ``dialect`` with parameters named ``keys``."""
    if isinstance(statement, ExecutableDDLElement):
        return statement.compile(dialect=dialect)
    return statement.compile(dialect=dialect, column_keys=keys)


def compiled(statement: ClauseElement, dialect: Dialect, keys: list[str]) -> str:
    """``statement`` as ``dialect`` would send it with parameters named ``keys``."""
    return str(compiled_for(statement, dialect, keys))


def main(names: list[str]) -> dict[str, Any]:
    import agentledger
    from agentledger._dialects import PROFILE_IN_USE
    from agentledger._probe import probe_untested

    report: dict[str, Any] = {"profile": PROFILE_IN_USE, "steps": [], "error": None}
    captured: dict[str, Any] = {}
    texts: dict[str, str] = {}
    empty: dict[str, set[str]] = {}

    def keep(connection: Any, statement: Any, multiparams: Any, params: Any, *_: Any) -> None:
        if isinstance(statement, ClauseElement) and not isinstance(statement, TextClause):
            keys = sorted(parameter_keys(multiparams, params))
            sqlite = compiled(statement, connection.dialect, keys)
            # One construct per distinct SQL: the same statement sent again adds nothing.
            captured.setdefault(sqlite, (statement, keys))
            empty.setdefault(sqlite, set()).update(empty_strings(multiparams, params))
        else:
            texts[str(statement)] = kind_of(statement)

    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'ledger.db'}"
        with agentledger.Ledger(url) as ledger:
            ledger.upgrade()
            event.listen(ledger.engine, "before_execute", keep)
            try:
                for step in scenario(ledger):
                    report["steps"].append(step)
                # What a dialect agentledger was not tested on is sent first instead.
                with ledger.engine.connect() as connection:
                    probe_untested(connection)
                report["steps"].append("the capability probe of an untested dialect")
            except Exception:
                report["error"] = f"{report['steps'][-1]}: {traceback.format_exc()}"

    dialects = {name: DIALECTS[name]() for name in names}
    statements = []
    for sqlite_sql, (statement, keys) in captured.items():
        entry: dict[str, Any] = {
            "sqlite": sqlite_sql,
            "kind": kind_of(statement),
            "tables": tables_of(statement),
            "compiled": {},
            "errors": {},
            "locking": getattr(statement, "_for_update_arg", None) is not None,
            "shared": bool(getattr(getattr(statement, "_for_update_arg", None), "read", False)),
            "empty_strings": sorted(empty[sqlite_sql]),
            "empty_strings_to_oracle": sent_empty(
                statement, keys, empty[sqlite_sql], DIALECTS["oracle"]()
            ),
            "oracle_reads_stand_in_as_stored": read_without_stand_in(
                statement, keys, DIALECTS["oracle"]()
            ),
        }
        for name, dialect in dialects.items():
            try:
                entry["compiled"][name] = compiled(statement, dialect, keys)
            except Exception as error:
                entry["errors"][name] = f"{type(error).__name__}: {error}"
        statements.append(entry)
    report["statements"] = statements
    report["texts"] = [
        {"sql": re.sub(r"\s+", " ", sql).strip(), "kind": kind} for sql, kind in texts.items()
    ]
    return report


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
