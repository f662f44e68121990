"""Google ADK's session service, side by side: agentledger's ``LedgerSessionService``
and ADK's own ``DatabaseSessionService`` on the same database, in one run.

Each service gets the same data through its own API (a session of ``events`` events,
an app of ``sessions`` sessions), then every operation runs in interleaved rounds: one
call of each service per round, in a shuffled order, after untimed warm-up rounds, so
the machine's noise lands on both alike. Nothing here judges a time: the numbers are
reported.

    python -m benchmarks.adk [--quick] [--databases sqlite,postgresql,mysql]
        [--postgres-url URL] [--mysql-url URL] [--out FOLDER]
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

from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.adk.sessions.session import Session
from google.genai import types
from sqlalchemy.engine import URL, make_url

from agentledger import AsyncLedger
from agentledger.integrations.adk import LedgerSessionService

from .seed import migrate, recreate_database, server_url

SERVICES = ("agentledger", "adk")
ASYNC_DRIVERS = {"sqlite": "aiosqlite", "postgresql": "asyncpg", "mysql": "aiomysql"}
APP, LISTED_APP, USER = "bench", "bench-listing", "ada"
REPLY = "The 9:40 from Lisbon reaches Porto at 12:33; a window seat is free in coach 4. " * 3


@dataclass(frozen=True)
class Config:
    """Sizes and rounds; ``full`` is the recorded run, ``quick`` the smoke test."""

    name: str
    events: int
    sessions: int
    rounds: dict[str, int]


FULL = Config(
    "full",
    events=1_000,
    sessions=2_000,
    rounds={
        "append_event": 200,
        "append_event_scoped": 200,
        "get_all": 30,
        "get_last_20": 200,
        "list": 15,
    },
)
QUICK = Config(
    "quick",
    events=40,
    sessions=30,
    rounds={
        "append_event": 6,
        "append_event_scoped": 6,
        "get_all": 3,
        "get_last_20": 6,
        "list": 3,
    },
)
LABELS = {
    "append_event": "append_event, a model reply",
    "append_event_scoped": "append_event, with session, user, app and temp state",
    "get_all": "get_session, all {events:,} events",
    "get_last_20": "get_session, last 20 of {events:,} events",
    "list": "list_sessions, {sessions:,} sessions of one user",
}


def _event(n: int, *, scoped: bool = False) -> Event:
    """A model reply; ``scoped``: with a state delta in every scope (a tool's, say)."""
    content = types.Content(role="model", parts=[types.Part(text=f"{n}: {REPLY}")])
    delta = {"turn": n, "user:last_seen": n, "app:replies": n, "temp:scratch": n}
    return Event(
        author="planner",
        invocation_id=f"inv-{n}",
        content=content,
        actions=EventActions(state_delta=delta if scoped else {}),
    )


async def _seed(service: BaseSessionService, config: Config) -> dict[str, Session]:
    long = await service.create_session(app_name=APP, user_id=USER, session_id="long")
    for n in range(config.events):
        await service.append_event(long, _event(n, scoped=n % 10 == 0))
    for n in range(config.sessions):
        await service.create_session(app_name=LISTED_APP, user_id=USER, state={"n": n})
    appends = await service.create_session(app_name=APP, user_id=USER, session_id="appends")
    return {"appends": appends}


def _operations(
    service: BaseSessionService, seeded: dict[str, Session]
) -> dict[str, Callable[[], Awaitable[Any]]]:
    counter = iter(range(10**9))
    last_20 = GetSessionConfig(num_recent_events=20)

    async def append() -> Any:
        return await service.append_event(seeded["appends"], _event(next(counter)))

    async def append_scoped() -> Any:
        return await service.append_event(seeded["appends"], _event(next(counter), scoped=True))

    async def get_all() -> Any:
        return await service.get_session(app_name=APP, user_id=USER, session_id="long")

    async def get_last() -> Any:
        found = await service.get_session(
            app_name=APP, user_id=USER, session_id="long", config=last_20
        )
        assert found is not None and len(found.events) == 20
        return found

    async def listing() -> Any:
        return await service.list_sessions(app_name=LISTED_APP, user_id=USER)

    return {
        "append_event": append,
        "append_event_scoped": append_scoped,
        "get_all": get_all,
        "get_last_20": get_last,
        "list": listing,
    }


async def run_database(dialect: str, url: URL, config: Config, seed: int) -> dict[str, Any]:
    """Seed both services on ``url``'s database and time every operation; the result."""
    recreate_database(dialect, url)
    migrate(dialect, url)
    async_url = url.set(drivername=f"{url.get_backend_name()}+{ASYNC_DRIVERS[dialect]}")
    ledger = AsyncLedger(async_url)
    adk = DatabaseSessionService(db_url=async_url.render_as_string(hide_password=False))
    services: dict[str, BaseSessionService] = {
        "agentledger": LedgerSessionService(ledger),
        "adk": adk,
    }
    try:
        await adk.prepare_tables()
        started = time.perf_counter()
        operations = {}
        for name, service in services.items():
            operations[name] = _operations(service, await _seed(service, config))
        seeding = time.perf_counter() - started
        print(f"{dialect}: seeded in {seeding:.0f} s", file=sys.stderr)
        shuffle = random.Random(seed)
        timings: dict[str, dict[str, list[float]]] = {}
        for op, timed in config.rounds.items():
            samples: dict[str, list[float]] = {name: [] for name in SERVICES}
            for round_ in range(timed + max(1, timed // 10)):
                for name in shuffle.sample(SERVICES, len(SERVICES)):
                    begin = time.perf_counter()
                    await operations[name][op]()
                    if round_ >= max(1, timed // 10):
                        samples[name].append(time.perf_counter() - begin)
            timings[op] = samples
    finally:
        await adk.close()
        await ledger.close()
    return {
        "dialect": dialect,
        "config": config.name,
        "seeding_s": round(seeding, 1),
        "operations": [
            {
                "key": op,
                "label": LABELS[op].format(events=config.events, sessions=config.sessions),
                "rounds": len(samples["adk"]),
                **{f"{name}_ms": statistics.median(samples[name]) * 1000 for name in SERVICES},
            }
            for op, samples in timings.items()
        ],
    }


NAMES = {"sqlite": "SQLite (file)", "postgresql": "PostgreSQL", "mysql": "MariaDB"}


def markdown(results: list[dict[str, Any]]) -> str:
    """The side-by-side table: medians and how many times agentledger is faster."""
    lines = [
        "| database | operation | LedgerSessionService | DatabaseSessionService | faster by |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for result in results:
        for op in result["operations"]:
            ours, theirs = op["agentledger_ms"], op["adk_ms"]
            lines.append(
                f"| {NAMES[result['dialect']]} | {op['label']} | {ours:.2f} ms | "
                f"{theirs:.2f} ms | {theirs / ours:.1f}x |"
            )
    return "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.adk", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small data, few rounds: a smoke run")
    parser.add_argument("--databases", default="sqlite,postgresql,mysql")
    parser.add_argument("--postgres-url", help="default: as for python3 dev.py bench")
    parser.add_argument("--mysql-url", help="default: as for python3 dev.py bench")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--seed", type=int, default=20261201, help="seed of the shuffles")
    return parser


def main(argv: list[str]) -> int:
    """Run the comparison on each database asked for; write adk.json and adk.md."""
    args = _parser().parse_args(argv)
    config = QUICK if args.quick else FULL
    results = []
    with tempfile.TemporaryDirectory(prefix="agentledger-adk-bench-") as folder:
        for dialect in [name.strip() for name in args.databases.split(",") if name.strip()]:
            if dialect == "sqlite":
                url = make_url(f"sqlite:///{folder}/bench.db")
            else:
                given = args.postgres_url if dialect == "postgresql" else args.mysql_url
                url = server_url(dialect, given)
            results.append(asyncio.run(run_database(dialect, url, config, args.seed)))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "adk.json").write_text(json.dumps(results, indent=1) + "\n")
    table = markdown(results)
    (args.out / "adk.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
