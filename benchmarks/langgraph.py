"""agentledger's LangGraph saver side by side with LangGraph's own SQLite and PostgreSQL
savers (``langgraph-checkpoint-sqlite``, ``-postgres``: the ``bench`` extra), doing the
same work in one run.

Each saver builds a thread the way a graph does: per step one checkpoint whose
``messages`` channel grows by one message, whose ``step`` channel changes, and whose
``system`` channel (a 2 KB prompt) never changes after the first. On threads of 10 and
1,000 checkpoints it then times ``put``, ``put_writes``, ``get_tuple`` of the latest and
of an old checkpoint, ``list(limit=10)`` and the first ``put`` of a new thread,
interleaved (each round calls every saver once, in a shuffled order), and reads how
many bytes each saver's tables take.

    python -m benchmarks.langgraph [--rounds 30] [--steps 10,1000] [--postgres-url URL]
        [--out benchmarks/results/langgraph.json]

The PostgreSQL database (default ``postgresql://postgres@127.0.0.1:5432/agentledger_bench_lg``
or ``$AGENTLEDGER_BENCH_POSTGRES_URL``) is dropped and recreated; SQLite runs in a
temporary folder.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from agentledger import Ledger
from agentledger.integrations.langgraph import LedgerSaver

OPERATIONS = ("put", "put_writes", "get_tuple_latest", "get_tuple_old", "list_10", "put_new_thread")
SYSTEM_PROMPT = "You are a careful assistant. " * 70  # about 2 KB, never changes
MESSAGE = "user: please look up the opening hours of the museum, thanks {n:05d}"


def _checkpoint(saver: BaseCheckpointSaver[Any], step: int, versions: dict[str, Any]) -> Any:
    """The checkpoint of step ``step`` and its new versions, as a graph would put it."""
    new = {"messages": saver.get_next_version(versions.get("messages"), None)}
    new["step"] = saver.get_next_version(versions.get("step"), None)
    if "system" not in versions:
        new["system"] = saver.get_next_version(None, None)
    versions.update(new)
    checkpoint = {
        "v": 4,
        "id": str(uuid.uuid7()) if hasattr(uuid, "uuid7") else _uuid6(),
        "ts": "2026-12-01T00:00:00+00:00",
        "channel_values": {
            "messages": [MESSAGE.format(n=n) for n in range(step + 1)],
            "step": step,
            "system": SYSTEM_PROMPT,
        },
        "channel_versions": dict(versions),
        "versions_seen": {"agent": {"messages": versions["messages"]}},
        "updated_channels": sorted(new),
    }
    return checkpoint, new


def _uuid6() -> str:
    from langgraph.checkpoint.base.id import uuid6

    return str(uuid6(clock_seq=-1))


class Thread:
    """One thread on one saver: built to a length, then timed."""

    def __init__(self, name: str, saver: BaseCheckpointSaver[Any], size: Callable[[], int]):
        self.name = name
        self.saver = saver
        self.size = size
        self.thread_id = f"bench-{uuid.uuid4().hex[:8]}"
        self.versions: dict[str, Any] = {}
        self.configs: list[dict[str, Any]] = []
        self.steps = 0

    def put(self) -> None:
        checkpoint, new = _checkpoint(self.saver, self.steps, self.versions)
        config: dict[str, Any] = {
            "configurable": {"thread_id": self.thread_id, "checkpoint_ns": ""}
        }
        if self.configs:
            config["configurable"]["checkpoint_id"] = self.configs[-1]["configurable"][
                "checkpoint_id"
            ]
        metadata = {"source": "loop", "step": self.steps, "parents": {}}
        self.configs.append(self.saver.put(config, checkpoint, metadata, new))
        self.steps += 1

    def put_writes(self) -> None:
        writes = [("messages", [MESSAGE.format(n=self.steps)]), ("step", self.steps)]
        self.saver.put_writes(self.configs[-1], writes, str(uuid.uuid4()), "~__pregel_pull, agent")

    def get_latest(self) -> None:
        found = self.saver.get_tuple({"configurable": {"thread_id": self.thread_id}})
        assert found is not None and found.checkpoint["channel_values"]["step"] == self.steps - 1

    def get_old(self) -> None:
        found = self.saver.get_tuple(self.configs[min(4, len(self.configs) - 1)])
        assert found is not None

    def list_10(self) -> None:
        found = list(self.saver.list({"configurable": {"thread_id": self.thread_id}}, limit=10))
        assert len(found) == min(10, self.steps)

    def put_new_thread(self) -> None:
        """The first put of a thread of its own (agentledger creates its session)."""
        Thread(self.name, self.saver, self.size).put()


PUT_SAMPLES = 5
"""The fewest puts of a build whose median is the ``put`` time: the last tenth of a
build of 1,000, the last 5 of 10 (one call alone was no median: one hiccup showed)."""


def _timed(call: Callable[[], None]) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1000


@contextmanager
def _savers(folder: Path, postgres_url: str | None) -> Iterator[list[tuple[str, str, Any]]]:
    """(database, saver name, saver, bytes-of-its-tables) for every saver to compare."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    with ExitStack() as stack:
        found: list[tuple[str, str, Any]] = []
        ours_path = folder / "agentledger.db"
        ledger = stack.enter_context(Ledger(f"sqlite:///{ours_path}"))
        ledger.upgrade()
        found.append(("sqlite", "agentledger", (LedgerSaver(ledger), _sqlite_size(ours_path))))
        theirs_path = folder / "langgraph.db"
        connection = sqlite3.connect(theirs_path, check_same_thread=False)
        stack.callback(connection.close)
        # The same durability as agentledger's SQLite connections: WAL, synchronous=FULL.
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        sqlite_saver = SqliteSaver(connection)
        sqlite_saver.setup()
        found.append(("sqlite", "langgraph", (sqlite_saver, _sqlite_size(theirs_path))))
        if postgres_url is not None:
            found.extend(_postgres(stack, postgres_url))
        yield found


def _postgres(stack: ExitStack, url: str) -> list[tuple[str, str, Any]]:
    from langgraph.checkpoint.postgres import PostgresSaver

    base = make_url(url)
    admin = create_engine(
        base.set(database="postgres"), poolclass=NullPool, isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{base.database}"'))
        connection.execute(text(f'CREATE DATABASE "{base.database}"'))
    admin.dispose()
    ledger = stack.enter_context(Ledger(base))
    ledger.upgrade()
    saver = stack.enter_context(PostgresSaver.from_conn_string(base.render_as_string(False)))
    saver.setup()
    engine = create_engine(base.set(drivername="postgresql+psycopg"), poolclass=NullPool)
    stack.callback(engine.dispose)

    def size(prefix: str) -> Callable[[], int]:
        def measure() -> int:
            with engine.connect() as connection:
                return int(
                    connection.execute(
                        text(
                            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) "
                            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                            "WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname LIKE :p"
                        ),
                        {"p": prefix},
                    ).scalar_one()
                )

        return measure

    return [
        ("postgresql", "agentledger", (LedgerSaver(ledger), size("agentledger_langgraph_%"))),
        ("postgresql", "langgraph", (saver, size("checkpoint%"))),
    ]


def _sqlite_size(path: Path) -> Callable[[], int]:
    def measure() -> int:
        connection = sqlite3.connect(path)
        try:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            pages = connection.execute("PRAGMA page_count").fetchone()[0]
            free = connection.execute("PRAGMA freelist_count").fetchone()[0]
            page_size = connection.execute("PRAGMA page_size").fetchone()[0]
            return int((pages - free) * page_size)
        finally:
            connection.close()

    return measure


def run(steps: list[int], rounds: int, postgres_url: str | None, seed: int) -> list[dict[str, Any]]:
    """Every operation on every saver and thread length: medians in ms, bytes per step."""
    shuffle = random.Random(seed)
    results = []
    every: list[tuple[dict[str, Any], Thread]] = []
    with tempfile.TemporaryDirectory() as folder, _savers(Path(folder), postgres_url) as savers:
        for length in steps:
            threads = [
                (database, name, Thread(name, saver, size))
                for database, name, (saver, size) in savers
            ]
            before = {id(thread): thread.size() for _, _, thread in threads}
            build: dict[int, list[float]] = {id(thread): [] for _, _, thread in threads}
            for _ in range(length):
                for _, _, thread in threads:
                    build[id(thread)].append(_timed(thread.put))
            stored = {id(thread): thread.size() - before[id(thread)] for _, _, thread in threads}
            timings: dict[tuple[int, str], list[float]] = {}
            for _ in range(rounds):
                order = [(thread, op) for _, _, thread in threads for op in OPERATIONS[1:]]
                shuffle.shuffle(order)
                for thread, op in order:
                    call = {
                        "put_writes": thread.put_writes,
                        "get_tuple_latest": thread.get_latest,
                        "get_tuple_old": thread.get_old,
                        "list_10": thread.list_10,
                        "put_new_thread": thread.put_new_thread,
                    }[op]
                    timings.setdefault((id(thread), op), []).append(_timed(call))
            for database, name, thread in threads:
                tail = build[id(thread)][-max(PUT_SAMPLES, length // 10) :]
                row = {
                    "database": database,
                    "saver": name,
                    "checkpoints": length,
                    "put": statistics.median(tail),
                    "bytes_per_step": stored[id(thread)] / length,
                }
                for op in OPERATIONS[1:]:
                    row[op] = statistics.median(timings[(id(thread), op)])
                results.append(row)
                every.append((row, thread))
        _old_side_by_side(every, rounds, shuffle)
    return results


def _old_side_by_side(
    every: list[tuple[dict[str, Any], Thread]], rounds: int, shuffle: random.Random
) -> None:
    """``get_tuple`` of an old checkpoint of every thread, all lengths interleaved in
    one phase, into each row's ``get_tuple_old_side_by_side``: the per-length phases
    above run on a database of a different size after different calls (a 30 ms
    ``list`` of a long thread leaves the CPU's caches cold), so comparing their medians
    across lengths measures those as well as the read."""
    timings: dict[int, list[float]] = {id(row): [] for row, _ in every}
    for _ in range(rounds):
        order = list(every)
        shuffle.shuffle(order)
        for row, thread in order:
            timings[id(row)].append(_timed(thread.get_old))
    for row, _ in every:
        row["get_tuple_old_side_by_side"] = statistics.median(timings[id(row)])


LABELS = {
    "put": "put",
    "put_writes": "put_writes",
    "get_tuple_latest": "get_tuple latest",
    "get_tuple_old": "get_tuple old",
    "list_10": "list(limit=10)",
    "put_new_thread": "put, new thread",
}
"""Each operation's name in the tables."""


def markdown(results: list[dict[str, Any]]) -> str:
    """The side-by-side table: each saver's medians, and agentledger's ratio to the
    built-in saver of the same database (below 1: agentledger is faster or smaller)."""
    columns = [LABELS[op] for op in OPERATIONS]
    lines = [
        f"| database | checkpoints | saver | {' | '.join(columns)} | bytes per step |",
        "| --- | ---: | --- |" + " ---: |" * (len(columns) + 1),
    ]
    keys = (*OPERATIONS, "bytes_per_step")
    for row in results:
        cells = [f"{row[key]:.2f} ms" for key in OPERATIONS] + [f"{row['bytes_per_step']:,.0f}"]
        lines.append(
            f"| {row['database']} | {row['checkpoints']:,} | {row['saver']} | "
            + " | ".join(cells)
            + " |"
        )
        if row["saver"] == "langgraph":
            ours = next(
                r
                for r in results
                if r["database"] == row["database"]
                and r["checkpoints"] == row["checkpoints"]
                and r["saver"] == "agentledger"
            )
            ratios = [f"**{ours[key] / row[key]:.2f}x**" if row[key] else "-" for key in keys]
            lines.append(
                f"| {row['database']} | {row['checkpoints']:,} | ratio | "
                + " | ".join(ratios)
                + " |"
            )
    return "\n".join(lines) + "\n"


FLAT = 1.25
"""How much an old checkpoint's ``get_tuple`` may grow from the shortest thread to the
longest and still count as flat (timed side by side: ``_old_side_by_side``): its value
is the same size on both, and a single-call median on this machine moves by up to a
fifth between runs."""


def _ratio(ours: float, theirs: float) -> float:
    """``ours / theirs``; a short thread may add no page to either saver's tables."""
    if theirs == 0:
        return 1.0 if ours == 0 else math.inf
    return ours / theirs


def targets(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each of the issue's targets per database, measured: every operation at least as
    fast as the built-in saver (ratio <= 1), ``get_tuple`` of an old checkpoint flat from
    the shortest thread to the longest (growth <= ``FLAT``, timed side by side), and
    fewer bytes per step than the built-in saver on the longest thread (ratio < 1)."""
    by = {(r["database"], r["saver"], r["checkpoints"]): r for r in results}
    found = []
    for database in dict.fromkeys(r["database"] for r in results):
        lengths = sorted({r["checkpoints"] for r in results if r["database"] == database})
        ours = {n: by[(database, "agentledger", n)] for n in lengths}
        theirs = {n: by[(database, "langgraph", n)] for n in lengths}
        shortest, longest = lengths[0], lengths[-1]
        measured = [
            (f"{LABELS[op]} at {n:,}, vs LangGraph's", 1.0, False, ours[n][op] / theirs[n][op])
            for n in lengths
            for op in OPERATIONS
        ]
        if longest != shortest:
            old = "get_tuple_old_side_by_side"
            growth = ours[longest][old] / ours[shortest][old]
            name = f"get_tuple old at {longest:,} vs at {shortest:,}"
            measured.append((name, FLAT, False, growth))
        bytes_ratio = _ratio(ours[longest]["bytes_per_step"], theirs[longest]["bytes_per_step"])
        name = f"bytes per step at {longest:,}, vs LangGraph's"
        measured.append((name, 1.0, True, bytes_ratio))  # fewer bytes: strictly below
        for name, bound, strict, value in measured:
            found.append(
                {
                    "database": database,
                    "target": name,
                    "limit": f"{'<' if strict else '<='} {bound:.2f}x",
                    "measured": value,
                    "met": value < bound if strict else value <= bound,
                }
            )
    return found


def targets_markdown(found: list[dict[str, Any]]) -> str:
    """The targets as a table, a line each."""
    lines = ["| database | target | limit | measured | met |", "|---|---|---|---:|---|"]
    for t in found:
        met = "yes" if t["met"] else "**no**"
        lines.append(
            f"| {t['database']} | {t['target']} | {t['limit']} | {t['measured']:.2f}x | {met} |"
        )
    met = sum(t["met"] for t in found)
    return "\n".join(lines) + f"\n\n{met} of {len(found)} targets met.\n"


def main() -> None:
    """Run and print the side-by-side table and the targets; the rows and the targets
    also go to ``--out`` as JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.langgraph")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--steps", default="10,1000")
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "AGENTLEDGER_BENCH_POSTGRES_URL",
            "postgresql://postgres@127.0.0.1:5432/agentledger_bench_lg",
        ),
    )
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/langgraph.json"))
    args = parser.parse_args()
    steps = [int(value) for value in args.steps.split(",")]
    url = None if args.no_postgres else args.postgres_url
    results = run(steps, args.rounds, url, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    found = targets(results)
    args.out.write_text(json.dumps({"results": results, "targets": found}, indent=1) + "\n")
    print(markdown(results))
    print(targets_markdown(found))


if __name__ == "__main__":
    main()
