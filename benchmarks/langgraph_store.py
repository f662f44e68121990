"""agentledger's LangGraph store side by side with LangGraph's own SQLite and PostgreSQL
stores (``langgraph-checkpoint-sqlite``, ``-postgres``: the ``bench`` extra), doing the
same work in one run.

Each store holds the same items (10,000 by default: 100 users, each a namespace
``("users", <user>, "memories")``, each item a small JSON object with a ``kind`` and a
sentence). Then, interleaved (each round calls every store once per operation, in a
shuffled order), it times through ``BaseStore``'s public API: ``put`` over a stored
key, ``get`` of one, ``search`` of one user's items with a filter, ``search`` of every
user's newest items, and ``list_namespaces`` of the users.

Search by meaning is timed apart, on stores holding the same items with an
``IndexConfig`` (a deterministic 16-number embedding, no model): agentledger's on
SQLite and PostgreSQL and LangGraph's ``InMemoryStore``. LangGraph's SQL stores search
by meaning only through sqlite-vec (loaded as an SQLite extension, which this Python's
``sqlite3`` cannot load) and pgvector (a PostgreSQL extension this server lacks), so
they are not in that table.

    python -m benchmarks.langgraph_store [--items 10000] [--rounds 30]
        [--postgres-url URL] [--no-postgres] [--out benchmarks/results/langgraph_store.json]

The PostgreSQL database (default ``postgresql://postgres@127.0.0.1:5432/agentledger_bench_store``
or ``$AGENTLEDGER_BENCH_POSTGRES_URL``) is dropped and recreated; SQLite runs in a
temporary folder.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from langgraph.store.base import BaseStore, IndexConfig, PutOp
from langgraph.store.memory import InMemoryStore
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from agentledger import Ledger
from agentledger.integrations.langgraph import LedgerStore

OPERATIONS = ("put", "get", "search_filter", "search_newest", "list_namespaces")
LABELS = {
    "put": "put (overwrite)",
    "get": "get",
    "search_filter": "search one user, filter",
    "search_newest": "search all, newest 10",
    "list_namespaces": "list_namespaces",
}
USERS = 100
KINDS = ("food", "travel", "work", "family")
WORDS = ("pasta", "museum", "train", "garden", "meeting", "sister", "coffee", "river")
DIMS = 16
FILL_BATCH = 500


def embed(texts: list[str]) -> list[list[float]]:
    """A deterministic vector per text (no model: the store's work is what is timed)."""
    vectors = []
    for value in texts:
        digest = hashlib.blake2b(value.encode(), digest_size=DIMS).digest()
        vectors.append([byte / 255 - 0.5 for byte in digest])
    return vectors


INDEX = IndexConfig(dims=DIMS, embed=embed, fields=["text"])


def _namespace(user: int) -> tuple[str, ...]:
    return ("users", f"u{user:03d}", "memories")


def _value(number: int) -> dict[str, Any]:
    words = " ".join(WORDS[(number + step) % len(WORDS)] for step in range(6))
    return {"kind": KINDS[number % len(KINDS)], "n": number, "text": f"{number}: {words}"}


def fill(store: BaseStore, items: int) -> None:
    """Store ``items`` items, spread over USERS namespaces, a batch at a time."""
    for start in range(0, items, FILL_BATCH):
        store.batch(
            [
                PutOp(_namespace(number % USERS), f"m{number}", _value(number))
                for number in range(start, min(items, start + FILL_BATCH))
            ]
        )


class Timed:
    """The operations on one store, each drawing its arguments from ``pick``."""

    def __init__(self, store: BaseStore, items: int, pick: random.Random) -> None:
        self.store = store
        self.items = items
        self.pick = pick

    def _number(self) -> int:
        return self.pick.randrange(self.items)

    def put(self) -> None:
        number = self._number()
        self.store.put(_namespace(number % USERS), f"m{number}", _value(number))

    def get(self) -> None:
        number = self._number()
        assert self.store.get(_namespace(number % USERS), f"m{number}") is not None

    def search_filter(self) -> None:
        user = self.pick.randrange(USERS)
        found = self.store.search(_namespace(user), filter={"kind": "food"}, limit=10)
        assert all(item.value["kind"] == "food" for item in found)

    def search_newest(self) -> None:
        assert len(self.store.search(("users",), limit=10)) == min(10, self.items)

    def list_namespaces(self) -> None:
        found = self.store.list_namespaces(prefix=("users",), max_depth=2, limit=USERS)
        assert len(found) == min(USERS, self.items)

    def search_meaning(self) -> None:
        number = self._number()
        assert self.store.search(("users",), query=_value(number)["text"], limit=10)


def _timed(call: Callable[[], None]) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1000


@contextmanager
def _stores(
    folder: Path, postgres_url: str | None
) -> Iterator[tuple[list[tuple[str, str, BaseStore]], list[tuple[str, str, BaseStore]]]]:
    """The stores compared (database, store name, store), and those searched by
    meaning."""
    from langgraph.store.sqlite import SqliteStore

    with ExitStack() as stack:
        plain: list[tuple[str, str, BaseStore]] = []
        indexed: list[tuple[str, str, BaseStore]] = []
        ours = stack.enter_context(Ledger(f"sqlite:///{folder / 'agentledger.db'}"))
        ours.upgrade()
        plain.append(("sqlite", "agentledger", LedgerStore(ours)))
        ours_indexed = stack.enter_context(Ledger(f"sqlite:///{folder / 'indexed.db'}"))
        ours_indexed.upgrade()
        indexed.append(("sqlite", "agentledger", LedgerStore(ours_indexed, index=INDEX)))
        connection = sqlite3.connect(
            folder / "langgraph.db", check_same_thread=False, isolation_level=None
        )
        stack.callback(connection.close)
        # The same durability as agentledger's SQLite connections: WAL, synchronous=FULL.
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        theirs = SqliteStore(connection)
        theirs.setup()
        plain.append(("sqlite", "langgraph", theirs))
        if postgres_url is not None:
            _postgres(stack, postgres_url, plain, indexed)
        indexed.append(("memory", "langgraph InMemoryStore", InMemoryStore(index=INDEX)))
        yield plain, indexed


def _postgres(
    stack: ExitStack,
    url: str,
    plain: list[tuple[str, str, BaseStore]],
    indexed: list[tuple[str, str, BaseStore]],
) -> None:
    from langgraph.store.postgres import PostgresStore

    base = make_url(url)
    admin = create_engine(
        base.set(database="postgres"), poolclass=NullPool, isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as connection:
        for name in (base.database, f"{base.database}_indexed"):
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    ours = stack.enter_context(Ledger(base))
    ours.upgrade()
    plain.append(("postgresql", "agentledger", LedgerStore(ours)))
    theirs = stack.enter_context(PostgresStore.from_conn_string(base.render_as_string(False)))
    theirs.setup()
    plain.append(("postgresql", "langgraph", theirs))
    ours_indexed = stack.enter_context(Ledger(base.set(database=f"{base.database}_indexed")))
    ours_indexed.upgrade()
    indexed.append(("postgresql", "agentledger", LedgerStore(ours_indexed, index=INDEX)))


def _interleaved(
    timed: list[tuple[dict[str, Any], Timed]],
    operations: tuple[str, ...],
    rounds: int,
    shuffle: random.Random,
) -> None:
    """Each operation on each store ``rounds`` times, shuffled within a round; each
    row gets the median milliseconds of each operation."""
    samples: dict[tuple[int, str], list[float]] = {}
    for _ in range(rounds):
        order = [(row, store, op) for row, store in timed for op in operations]
        shuffle.shuffle(order)
        for row, store, op in order:
            samples.setdefault((id(row), op), []).append(_timed(getattr(store, op)))
    for row, _ in timed:
        for op in operations:
            row[op] = statistics.median(samples[(id(row), op)])


def run(items: int, rounds: int, postgres_url: str | None, seed: int) -> dict[str, Any]:
    """Every operation on every store: medians in ms, and the fill's ms per item."""
    shuffle = random.Random(seed)
    with tempfile.TemporaryDirectory() as folder, _stores(Path(folder), postgres_url) as found:
        plain, indexed = found
        tables: dict[str, list[tuple[dict[str, Any], Timed]]] = {"plain": [], "indexed": []}
        for table, stores in (("plain", plain), ("indexed", indexed)):
            for database, name, store in stores:
                start = time.perf_counter()
                fill(store, items)
                filled = (time.perf_counter() - start) * 1000 / items
                row = {"database": database, "store": name, "items": items, "fill": filled}
                tables[table].append((row, Timed(store, items, random.Random(seed))))
        _interleaved(tables["plain"], OPERATIONS, rounds, shuffle)
        _interleaved(tables["indexed"], ("search_meaning",), rounds, shuffle)
    return {
        "results": [row for row, _ in tables["plain"]],
        "by_meaning": [row for row, _ in tables["indexed"]],
    }


def markdown(results: list[dict[str, Any]]) -> str:
    """The side-by-side table: each store's medians, and agentledger's ratio to
    LangGraph's store of the same database (below 1: agentledger is faster)."""
    keys = (*OPERATIONS, "fill")
    columns = [LABELS[op] for op in OPERATIONS] + ["fill, per item"]
    lines = [
        f"| database | store | {' | '.join(columns)} |",
        "| --- | --- |" + " ---: |" * len(columns),
    ]
    for row in results:
        cells = [f"{row[key]:.2f} ms" for key in OPERATIONS] + [f"{row['fill']:.3f} ms"]
        lines.append(f"| {row['database']} | {row['store']} | " + " | ".join(cells) + " |")
        if row["store"] == "langgraph":
            ours = next(
                r
                for r in results
                if r["database"] == row["database"] and r["store"] == "agentledger"
            )
            ratios = [f"**{ours[key] / row[key]:.2f}x**" for key in keys]
            lines.append(f"| {row['database']} | ratio | " + " | ".join(ratios) + " |")
    return "\n".join(lines) + "\n"


def meaning_markdown(rows: list[dict[str, Any]]) -> str:
    """Search by meaning (10 closest of every item), each store's median."""
    lines = ["| database | store | search by meaning, 10 closest |", "| --- | --- | ---: |"]
    lines += [
        f"| {row['database']} | {row['store']} | {row['search_meaning']:.2f} ms |" for row in rows
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    """Run and print both tables; the rows also go to ``--out`` as JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.langgraph_store")
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--seed", type=int, default=20261207)
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "AGENTLEDGER_BENCH_POSTGRES_URL",
            "postgresql://postgres@127.0.0.1:5432/agentledger_bench_store",
        ),
    )
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/langgraph_store.json"))
    args = parser.parse_args()
    url = None if args.no_postgres else args.postgres_url
    report = run(args.items, args.rounds, url, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(markdown(report["results"]))
    print(meaning_markdown(report["by_meaning"]))


if __name__ == "__main__":
    main()
