"""The viewer's case: time to first byte of each page of ``agentledger ui`` on a big
database, over real HTTP from uvicorn (the application as ``agentledger ui`` serves it).

    python -m benchmarks.ui [--quick] [--databases postgresql,sqlite,mysql] [--out DIR]

The database (the benchmark's own, dropped and recreated) holds 100,000 sessions, one of
them with a 10,000-message conversation and 100,000 steps, seeded in bulk like the main
benchmark, paused at a checkpoint of its last 20 messages. Each page is requested 30
times after a warm-up, one request at a time on a kept-alive connection; the time is
from sending the request to reading the status line and headers (Starlette sends them
with the body, once the page is rendered). Worst cases included: the framework filter
and a search that match nothing walk the whole listing. Results go to ``DIR/ui.json``
and ``DIR/ui.md``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import uvicorn
from sqlalchemy.engine import URL, make_url

from agentledger import CheckpointPayload, Ledger, PendingToolCall
from agentledger.ui import create_app

from .seed import SEED_TIME, Seeder, migrate, recreate_database, server_url, sync_url

TARGET_MS = 100.0
DATABASES = ("sqlite", "postgresql", "mysql")


@dataclass(frozen=True)
class Sizes:
    """How big the database is and how often each page is asked for."""

    sessions: int
    messages: int
    steps: int
    rounds: int
    warmup: int


FULL = Sizes(sessions=100_000, messages=10_000, steps=100_000, rounds=30, warmup=3)
QUICK = Sizes(sessions=1_000, messages=500, steps=1_000, rounds=2, warmup=1)


def seed(dialect: str, url: URL, sizes: Sizes) -> str:
    """A fresh database of ``sizes``; returns the id of the long conversation."""
    recreate_database(dialect, url)
    migrate(dialect, url)
    seeder = Seeder(dialect, url)
    try:
        seeder.listing_sessions(sizes.sessions)
        long = f"list-{sizes.sessions // 2:07d}"
        seeder.messages(long, sizes.messages)
        seeder.steps(long, sizes.steps)
        seeder.analyze()
    finally:
        seeder.close()
    with Ledger(sync_url(dialect, url)) as ledger:  # paused, waiting on a tool call
        window = ledger.messages.last(long, 20)
        call = {"id": "call-1", "name": "search", "arguments": {"q": "weather"}}
        pending = {"call-1": PendingToolCall(tool_call=call, interrupt_active=True)}
        payload = CheckpointPayload(context_window=window, pending_tool_calls=pending)
        ledger.checkpoints.save(long, payload)
    return long


def deep_cursor(url: URL, depth: int) -> str:
    """The cursor of the listing page after the first ``depth`` sessions."""
    with Ledger(url) as ledger:
        cursor = None
        for _ in range(max(1, depth // 1000)):
            cursor = ledger.sessions.list(limit=min(depth, 1000), cursor=cursor).next_cursor
        assert cursor is not None
        return cursor


def pages(long: str, sizes: Sizes, cursor: str) -> dict[str, str]:
    """What is measured: a name and the path of each page."""
    window = max(0, sizes.messages // 2)
    return {
        "sessions, first page": "/sessions",
        "sessions, first page (JSON)": "/sessions.json",
        f"sessions, page after {sizes.sessions // 2:,}": f"/sessions?cursor={cursor}",
        "sessions of an app (none match)": "/sessions?app=nobody",
        "sessions of a framework (none match)": "/sessions?framework=langgraph",
        "sessions, search (none match)": "/sessions?q=needle",
        f"session: last 100 of {sizes.messages:,} messages": f"/sessions/{long}",
        "session (JSON)": f"/sessions/{long}.json",
        f"session: messages after #{window:,}": f"/sessions/{long}?after={window}",
        f"usage, 30 days, {sizes.steps:,} steps": "/usage?days=30",
    }


@contextmanager
def serving(url: URL) -> Iterator[int]:
    """The viewer on a free port of 127.0.0.1, in a thread; yields the port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    app = create_app(
        url.render_as_string(hide_password=False), clock=lambda: SEED_TIME + timedelta(days=1)
    )
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the viewer did not start")
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def first_byte_ms(connection: http.client.HTTPConnection, path: str) -> tuple[float, int]:
    """One request: milliseconds to the status line and headers, and the body's size."""
    started = time.perf_counter()
    connection.request("GET", path)
    response = connection.getresponse()
    elapsed = (time.perf_counter() - started) * 1000
    body = response.read()
    if response.status != 200:
        raise RuntimeError(f"{path}: {response.status} {body[:300]!r}")
    return elapsed, len(body)


def measure(dialect: str, url: URL, sizes: Sizes) -> dict[str, Any]:
    long = seed(dialect, url, sizes)
    cursor = deep_cursor(sync_url(dialect, url), sizes.sessions // 2)
    rows = []
    with serving(url) as port:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for name, path in pages(long, sizes, cursor).items():
            for _ in range(sizes.warmup):
                first_byte_ms(connection, path)
            samples = [first_byte_ms(connection, path) for _ in range(sizes.rounds)]
            times = sorted(ms for ms, _ in samples)
            rows.append(
                {
                    "page": name,
                    "path": path if "cursor=" not in path else "/sessions?cursor=...",
                    "median_ms": statistics.median(times),
                    "p95_ms": times[min(len(times) - 1, int(len(times) * 0.95))],
                    "bytes": samples[-1][1],
                }
            )
        connection.close()
    return {"dialect": dialect, "sizes": sizes.__dict__, "pages": rows}


def markdown(results: list[dict[str, Any]]) -> str:
    lines = []
    for result in results:
        sizes = result["sizes"]
        lines += [
            f"### {result['dialect']}: {sizes['sessions']:,} sessions, a conversation of "
            f"{sizes['messages']:,} messages and {sizes['steps']:,} steps",
            "",
            "| page | first byte, median | p95 | size | under 100 ms |",
            "| --- | ---: | ---: | ---: | --- |",
        ]
        for row in result["pages"]:
            met = "yes" if row["median_ms"] < TARGET_MS else "**no**"
            lines.append(
                f"| {row['page']} | {row['median_ms']:.1f} ms | {row['p95_ms']:.1f} ms "
                f"| {row['bytes'] / 1024:.0f} KiB | {met} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ui", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a small database: a smoke run")
    parser.add_argument(
        "--databases", default="postgresql", help="comma-separated (default postgresql)"
    )
    parser.add_argument(
        "--postgres-url", help="default: $AGENTLEDGER_BENCH_POSTGRES_URL or the main benchmark's"
    )
    parser.add_argument(
        "--mysql-url", help="default: $AGENTLEDGER_BENCH_MYSQL_URL or the main benchmark's"
    )
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    wanted = [name.strip() for name in args.databases.split(",") if name.strip()]
    if set(wanted) - set(DATABASES):
        parser.error(f"--databases: choose from {', '.join(DATABASES)}")
    results = []
    with tempfile.TemporaryDirectory(prefix="agentledger-bench-ui-") as folder:
        for dialect in wanted:
            if dialect == "sqlite":
                url = make_url(f"sqlite:///{folder}/bench.db")
            else:
                given = args.postgres_url if dialect == "postgresql" else args.mysql_url
                url = server_url(dialect, given)
            results.append(measure(dialect, url, sizes))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ui.json").write_text(json.dumps(results, indent=2))
    text = markdown(results)
    (args.out / "ui.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
