"""LedgerSession beside the OpenAI Agents SDK's own sessions, on one database.

``python -m benchmarks.openai_agents [--quick] URL [URL ...]`` (plain ``sqlite:///``,
``postgresql://`` or ``mysql://`` URLs of databases it may write to: it migrates
agentledger's tables and lets the SDK create its own). For each store it reports:

- the median time of ``add_items`` (a batch of two), ``get_items(20)`` on a session of
  ``history`` items, and ``pop_item`` (interleaved rounds, after warm-up);
- eight concurrent writers, each with a session object of its own, doing read, then
  append (what a run does): how many appends were accepted on top of history their
  writer had not read, how many were refused (LedgerSession with
  ``unseen_items="refuse"``: the writer reads again and retries), and whether any item
  was lost.

Stores: LedgerSession, LedgerSession(unseen_items="refuse"), the SDK's
SQLAlchemySession, and on SQLite its SQLiteSession. Nothing is judged: numbers only
(a store that cannot run on a database reports its error instead).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
from agents.memory import SQLiteSession
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from agentledger import AsyncLedger, ConflictError
from agentledger.engine import create_async_engine_for, sqlite_file
from agentledger.integrations.openai_agents import LedgerSession


@dataclass(frozen=True)
class Sizes:
    """How much work: history length, timed rounds, writers and appends per writer."""

    history: int
    rounds: int
    writers: int
    appends: int


FULL = Sizes(history=200, rounds=60, writers=8, appends=20)
QUICK = Sizes(history=20, rounds=3, writers=3, appends=2)
Factory = Callable[[str], Any]
"""A store: a new session object for an SDK session id."""


def item(writer: str, n: int, seen: int) -> dict[str, Any]:
    """An item that says who wrote it and how many items its writer had read."""
    return {"role": "user", "content": f"{writer} {n}", "seen": seen}


def stores(url: str, engine: AsyncEngine, ledger: AsyncLedger) -> dict[str, Factory]:
    """The stores to compare on the database at ``url``."""
    found: dict[str, Factory] = {
        "LedgerSession": lambda sid: LedgerSession(sid, ledger),
        "LedgerSession refuse": lambda sid: LedgerSession(sid, ledger, unseen_items="refuse"),
        "SDK SQLAlchemySession": lambda sid: SQLAlchemySession(
            sid, engine=engine, create_tables=True
        ),
    }
    path = sqlite_file(url)
    if path is not None:
        found["SDK SQLiteSession"] = lambda sid: SQLiteSession(sid, db_path=path + ".sdk.db")
    return found


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await call()
    return time.perf_counter() - start


async def latencies(factory: Factory, sizes: Sizes) -> dict[str, float]:
    """Median milliseconds of add_items, get_items(20) and pop_item on one session."""
    session = factory(f"bench-{uuid.uuid4().hex}")
    await session.add_items([item("seed", n, n) for n in range(sizes.history)])
    samples: dict[str, list[float]] = {"add_items_2": [], "get_items_20": [], "pop_item": []}
    warmup = max(1, sizes.rounds // 10)
    for index in range(warmup + sizes.rounds):
        calls: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
            ("add_items_2", lambda: session.add_items([item("a", 0, 0), item("a", 1, 0)])),
            ("get_items_20", lambda: session.get_items(20)),
            ("pop_item", session.pop_item),
        ]
        random.shuffle(calls)
        for name, call in calls:
            elapsed = await timed(call)
            if index >= warmup:
                samples[name].append(elapsed)
    return {name: round(statistics.median(s) * 1000, 3) for name, s in samples.items()}


async def writers(factory: Factory, sizes: Sizes) -> dict[str, int]:
    """Concurrent read-then-append writers on one session: appends accepted on unseen
    history, appends refused (then read again and retried), items lost."""
    session_id = f"bench-{uuid.uuid4().hex}"
    refused = 0

    async def writer(name: str) -> None:
        nonlocal refused
        session = factory(session_id)
        for n in range(sizes.appends):
            while True:
                seen = len(await session.get_items())
                await asyncio.sleep(0)  # the model's turn: others may write now
                try:
                    await session.add_items([item(name, n, seen)])
                    break
                except ConflictError:
                    refused += 1

    await asyncio.gather(*(writer(f"w{w}") for w in range(sizes.writers)))
    stored = await factory(session_id).get_items()
    unseen = sum(1 for position, it in enumerate(stored) if it["seen"] != position)
    return {
        "appends": sizes.writers * sizes.appends,
        "accepted_on_unseen_history": unseen,
        "refused_then_retried": refused,
        "lost": sizes.writers * sizes.appends - len(stored),
    }


async def run(url: str, sizes: Sizes) -> dict[str, Any]:
    """Every store's numbers on the database at ``url``."""
    engine = create_async_engine_for(url)
    ledger = AsyncLedger(engine=engine)
    await ledger.upgrade()
    results: dict[str, Any] = {}
    try:
        for name, factory in stores(url, engine, ledger).items():
            try:
                results[name] = {
                    "latency_ms": await latencies(factory, sizes),
                    "writers": await writers(factory, sizes),
                }
            except SQLAlchemyError as error:  # the SDK's tables on MariaDB, say
                results[name] = {"error": str(error).splitlines()[0]}
    finally:
        await ledger.close()
        await engine.dispose()
    return results


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.openai_agents")
    parser.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes")
    parser.add_argument("urls", nargs="+", help="databases to write to")
    options = parser.parse_args(argv)
    sizes = QUICK if options.quick else FULL
    report = {}
    for url in options.urls:
        report[make_url(url).get_backend_name()] = asyncio.run(run(url, sizes))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
