"""Conversations side by side: agentledger beside the frameworks' own stores, through
each store's public API, on one database, in one run.

Each store holds conversations of 10, 1,000 and 5,000 items (the same short user
message each), then, in interleaved rounds (every store once per round, in a shuffled
order, after untimed warm-up rounds), it is timed appending one item to a conversation
of that length and loading a whole conversation of that length. The raw driver (one
held connection, hand-written SQL on agentledger's table, the JSON and times decoded
as the library decodes them) loads agentledger's conversations too: the floor every
load is measured against.

Stores: agentledger's ledger (``messages.append`` / ``messages.all``), its OpenAI
Agents SDK session (``LedgerSession``) and ADK session service
(``LedgerSessionService``); the SDK's ``SQLAlchemySession`` and, on SQLite,
``SQLiteSession``; ADK's ``DatabaseSessionService``. LangGraph keeps a conversation in
a checkpoint's channel, not as items: its saver is compared with agentledger's in
``benchmarks.langgraph``. Nothing here judges a time: the numbers and their ratios are
reported.

    python -m benchmarks.conversations [--quick] [--databases sqlite,postgresql]
        [--postgres-url URL] [--out FILE.json]

The PostgreSQL database is dropped and created again; SQLite runs in a temporary
folder.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
from agents.memory import SQLiteSession
from google.adk.events.event import Event
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.genai import types
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import create_async_engine

from agentledger import AsyncLedger
from agentledger.integrations.adk import LedgerSessionService
from agentledger.integrations.openai_agents import LedgerSession

from .raw import RawConnection, from_db_time, loads
from .report import panels
from .seed import migrate, recreate_database, server_url

TEXT = "Which trains leave Lisbon for Porto after nine tomorrow morning?"
ASYNC_DRIVERS = {"sqlite": "aiosqlite", "postgresql": "asyncpg"}
APP, USER = "bench", "ada"
RAW_LOAD = (
    "SELECT seq, role, content, metadata, created_at, external_key FROM agentledger_messages "
    "WHERE session_id = ? ORDER BY seq"
)
LEDGER = "agentledger"
RAW = "raw driver"


@dataclass(frozen=True)
class Config:
    """Conversation lengths and timed rounds per length; ``quick`` is the smoke test."""

    name: str
    lengths: tuple[int, ...]
    rounds: dict[int, int]


FULL = Config("full", (10, 1_000, 5_000), {10: 60, 1_000: 30, 5_000: 15})
QUICK = Config("quick", (3, 20), {3: 3, 20: 2})


class Store:
    """One store's conversations: ``append`` one item to, ``load`` all of, one of them."""

    name: str

    async def create(self, conversation: str, length: int) -> None:
        raise NotImplementedError

    async def append(self, conversation: str) -> None:
        raise NotImplementedError

    async def load(self, conversation: str) -> Any:
        raise NotImplementedError


class LedgerConversations(Store):
    name = LEDGER

    def __init__(self, ledger: AsyncLedger) -> None:
        self.ledger = ledger

    async def create(self, conversation: str, length: int) -> None:
        await self.ledger.sessions.create(conversation)
        for start in range(0, length, 500):
            count = min(500, length - start)
            await self.ledger.messages.append(conversation, [_item()] * count)

    async def append(self, conversation: str) -> None:
        await self.ledger.messages.append(conversation, [_item()])

    async def load(self, conversation: str) -> Any:
        return await self.ledger.messages.all(conversation)


class SdkStore(Store):
    """An OpenAI Agents SDK session class: a session object per conversation."""

    def __init__(self, name: str, make: Callable[[str], Any]) -> None:
        self.name = name
        self.make = make
        self.sessions: dict[str, Any] = {}

    async def create(self, conversation: str, length: int) -> None:
        session = self.sessions[conversation] = self.make(conversation)
        for start in range(0, length, 500):
            await session.add_items([_item()] * min(500, length - start))

    async def append(self, conversation: str) -> None:
        await self.sessions[conversation].add_items([_item()])

    async def load(self, conversation: str) -> Any:
        return await self.sessions[conversation].get_items()


class AdkStore(Store):
    """An ADK session service: a session per conversation, an event per item."""

    def __init__(self, name: str, service: BaseSessionService) -> None:
        self.name = name
        self.service = service
        self.sessions: dict[str, Any] = {}

    async def create(self, conversation: str, length: int) -> None:
        session = await self.service.create_session(
            app_name=APP, user_id=USER, session_id=conversation
        )
        self.sessions[conversation] = session
        for _ in range(length):
            await self.service.append_event(session, _event())

    async def append(self, conversation: str) -> None:
        await self.service.append_event(self.sessions[conversation], _event())

    async def load(self, conversation: str) -> Any:
        return await self.service.get_session(app_name=APP, user_id=USER, session_id=conversation)


class RawFloor(Store):
    """The raw driver loading agentledger's conversations (it appends nothing)."""

    name = RAW

    def __init__(self, dialect: str, raw: RawConnection) -> None:
        self.dialect = dialect
        self.raw = raw

    async def load(self, conversation: str) -> Any:
        rows = await self.raw.fetch(RAW_LOAD, conversation)
        dialect = self.dialect
        return [
            (r[0], r[1], loads(r[2]), loads(r[3]), from_db_time(dialect, r[4]), r[5]) for r in rows
        ]


def _item() -> dict[str, Any]:
    """One item of a conversation, as agentledger's messages and the SDK's items take it."""
    return {"role": "user", "content": TEXT}


def _event() -> Event:
    return Event(author="user", content=types.Content(role="user", parts=[types.Part(text=TEXT)]))


def _conversation(store: str, operation: str, length: int) -> str:
    """A conversation of its own for each store, operation and length."""
    return f"{store.replace(' ', '-').lower()}-{operation}-{length}"


async def run_database(
    dialect: str, url: URL, config: Config, seed: int, folder: Path
) -> dict[str, Any]:
    """Fill every store on ``url``'s database and time each cell; the medians in ms."""
    recreate_database(dialect, url)
    migrate(dialect, url)
    async_url = url.set(drivername=f"{url.get_backend_name()}+{ASYNC_DRIVERS[dialect]}")
    rendered = async_url.render_as_string(hide_password=False)
    ledger = AsyncLedger(async_url)
    sdk_engine = create_async_engine(rendered)
    adk = DatabaseSessionService(db_url=rendered)
    raw = await RawConnection.open(dialect, url)
    stores: list[Store] = [
        LedgerConversations(ledger),
        SdkStore("agentledger LedgerSession", lambda sid: LedgerSession(sid, ledger)),
        AdkStore("agentledger LedgerSessionService", LedgerSessionService(ledger)),
        SdkStore(
            "SDK SQLAlchemySession",
            lambda sid: SQLAlchemySession(sid, engine=sdk_engine, create_tables=True),
        ),
        AdkStore("ADK DatabaseSessionService", adk),
    ]
    if dialect == "sqlite":
        path = str(folder / "sdk.db")
        stores.append(SdkStore("SDK SQLiteSession", lambda sid: SQLiteSession(sid, db_path=path)))
    floor = RawFloor(dialect, raw)
    try:
        await adk.prepare_tables()
        started = time.perf_counter()
        for store in stores:
            for length in config.lengths:
                for operation in ("append", "load"):
                    await store.create(_conversation(store.name, operation, length), length)
        print(f"{dialect}: filled in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        shuffle = random.Random(seed)
        cells: list[dict[str, Any]] = []
        for length in config.lengths:
            for operation in ("append", "load"):
                players: list[Store] = [*stores, floor] if operation == "load" else [*stores]
                calls = {
                    store.name: _call(store, operation, length, floor_of=stores[0])
                    for store in players
                }
                medians = await _interleaved(calls, config.rounds[length], shuffle)
                cells.append({"operation": operation, "length": length, "ms": medians})
                print(f"{dialect}: {operation} {length}: {medians}", file=sys.stderr)
    finally:
        await raw.close()
        await adk.close()
        await sdk_engine.dispose()
        await ledger.close()
    return {"dialect": dialect, "config": config.name, "cells": cells}


def _call(
    store: Store, operation: str, length: int, *, floor_of: Store
) -> Callable[[], Awaitable[Any]]:
    """One timed call; the raw floor loads the ledger's own conversation."""
    owner = floor_of if isinstance(store, RawFloor) else store
    conversation = _conversation(owner.name, operation, length)
    if operation == "append":
        return lambda: store.append(conversation)
    return lambda: store.load(conversation)


async def _interleaved(
    calls: dict[str, Callable[[], Awaitable[Any]]], rounds: int, shuffle: random.Random
) -> dict[str, float]:
    """Each call ``rounds`` times, every one once per round in a shuffled order, after
    untimed warm-up rounds; the median milliseconds of each."""
    warmup = max(1, rounds // 10)
    samples: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for index in range(warmup + rounds):
        for name in shuffle.sample(names, len(names)):
            begin = time.perf_counter()
            await calls[name]()
            if index >= warmup:
                samples[name].append(time.perf_counter() - begin)
    return {name: round(statistics.median(found) * 1000, 3) for name, found in samples.items()}


NAMES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}


def markdown(results: list[dict[str, Any]]) -> str:
    """One row per cell: agentledger's median, the best framework store's, the raw
    floor's, and agentledger's ratio to each (below 1: agentledger is faster)."""
    lines = [
        "| database | cell | agentledger | best framework store | vs it | raw driver | vs raw |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for result in results:
        for cell in result["cells"]:
            ms = cell["ms"]
            others = {
                name: value
                for name, value in ms.items()
                if name not in (LEDGER, RAW) and not name.startswith("agentledger ")
            }
            best = min(others, key=others.__getitem__)
            ours = ms[LEDGER]
            raw = f"{ms[RAW]:.2f} ms | {ours / ms[RAW]:.2f}x" if RAW in ms else "| "
            lines.append(
                f"| {NAMES[result['dialect']]} | {cell['operation']} "
                f"{cell['length']:,} items | {ours:.2f} ms | {best}: {others[best]:.2f} ms | "
                f"{ours / others[best]:.2f}x | {raw} |"
            )
    return "\n".join(lines) + "\n"


def integrations_markdown(results: list[dict[str, Any]]) -> str:
    """Every store's median in every cell, agentledger's framework adapters included."""
    names = sorted({name for result in results for cell in result["cells"] for name in cell["ms"]})
    lines = [
        "| database | cell | " + " | ".join(names) + " |",
        "| --- | --- | " + " | ".join("---:" for _ in names) + " |",
    ]
    for result in results:
        for cell in result["cells"]:
            values = [f"{cell['ms'][name]:.2f}" if name in cell["ms"] else "" for name in names]
            lines.append(
                f"| {NAMES[result['dialect']]} | {cell['operation']} {cell['length']:,} | "
                + " | ".join(values)
                + " |"
            )
    return "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.conversations")
    parser.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes")
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument(
        "--postgres-url",
        default=None,
        help="a database it may drop and create (default: $AGENTLEDGER_BENCH_POSTGRES_URL "
        "or agentledger_bench, with _conversations appended to the name)",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None, help="also write the results here")
    return parser


def run(
    dialects: list[str], *, quick: bool, postgres_url: str | None, seed: int
) -> list[dict[str, Any]]:
    """Every cell of every store on each database in ``dialects`` (sqlite, postgresql)."""
    config = QUICK if quick else FULL
    results = []
    with tempfile.TemporaryDirectory(prefix="agentledger-conversations-") as folder:
        for dialect in dialects:
            if dialect == "sqlite":
                url = make_url(f"sqlite:///{folder}/conversations.db")
            elif postgres_url is not None:
                url = make_url(postgres_url)
            else:
                url = server_url(dialect, None)
                url = url.set(database=f"{url.database}_conversations")
            results.append(asyncio.run(run_database(dialect, url, config, seed, Path(folder))))
    return results


def chart(results: list[dict[str, Any]], path: Path) -> bool:
    """Each store's median in each cell beside agentledger's, as a ratio to agentledger's
    (below 1: that store is faster), one panel per database. False when matplotlib is not
    installed (``pip install -e '.[bench]'``)."""
    with panels(len(results), path) as axes:
        if axes is None:
            return False
        for axis, result in zip(axes, results, strict=True):
            _stores_panel(axis, result)
    return True


def _stores_panel(axis: Any, result: dict[str, Any]) -> None:
    """Each store's median over agentledger's, per cell, on one database."""
    cells = result["cells"]
    names = [n for n in dict.fromkeys(n for c in cells for n in c["ms"]) if n != LEDGER]
    width = 0.8 / len(names)
    for index, name in enumerate(names):
        axis.bar(
            [p + (index - (len(names) - 1) / 2) * width for p in range(len(cells))],
            [c["ms"][name] / c["ms"][LEDGER] if name in c["ms"] else 0 for c in cells],
            width,
            label=name,
        )
    axis.axhline(1.0, color="black", linewidth=0.8, label="agentledger")
    axis.set_yscale("log")
    axis.yaxis.set_major_formatter(lambda value, _: f"{value:g}x")
    axis.yaxis.set_minor_formatter(lambda value, _: "")
    axis.set_xticks(list(range(len(cells))), [f"{c['operation']} {c['length']:,}" for c in cells])
    axis.set_ylabel("store's median / agentledger's")
    title = "each store beside agentledger (above 1: slower)"
    axis.set_title(f"{NAMES[result['dialect']]}: {title}")
    axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def main(argv: list[str]) -> int:
    options = _parser().parse_args(argv)
    results = run(
        options.databases.split(","),
        quick=options.quick,
        postgres_url=options.postgres_url,
        seed=options.seed,
    )
    if options.out is not None:
        options.out.write_text(json.dumps(results, indent=2))
    print(markdown(results))
    print(integrations_markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
