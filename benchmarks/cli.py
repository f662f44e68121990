"""The command line: which databases, which mode, where the results go."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import NullPool

from . import conversations
from .report import chart, markdown, targets
from .run import FULL, QUICK, Config, run_database
from .seed import server_url, sync_url

DATABASES = ("sqlite", "postgresql", "mysql")
PARTS = ("core", "conversations", "langgraph", "budget")
"""``core``: the async API against its floors; ``conversations``: agentledger beside
the frameworks' stores (benchmarks/conversations.py, SQLite and PostgreSQL);
``langgraph``: its saver beside LangGraph's own (benchmarks/langgraph.py); ``budget``:
one ledger call and two saver calls layer by layer (benchmarks/per_call.py,
benchmarks/saver_budget.py; SQLite and PostgreSQL)."""
BUDGET_ROUNDS = (2000, 20)
"""Rounds of the budget part: full, quick."""
LANGGRAPH_FULL = ([10, 1000], 30)
LANGGRAPH_QUICK = ([3, 12], 2)
"""Thread lengths and rounds of the LangGraph part."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python3 dev.py bench",
        description="agentledger's async API against a Core floor and a raw-driver floor, "
        "its conversations beside the frameworks' stores, its LangGraph saver beside "
        "LangGraph's.",
    )
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help="comma-separated: core, conversations, langgraph, budget (default: all four)",
    )
    parser.add_argument("--quick", action="store_true", help="small data, few rounds: a smoke run")
    parser.add_argument(
        "--databases",
        default=",".join(DATABASES),
        help="comma-separated: sqlite, postgresql, mysql (default: all three)",
    )
    parser.add_argument("--postgres-url", help="default: $AGENTLEDGER_BENCH_POSTGRES_URL or "
                        "postgresql://postgres@127.0.0.1:5432/agentledger_bench")  # fmt: skip
    parser.add_argument("--mysql-url", help="default: $AGENTLEDGER_BENCH_MYSQL_URL or "
                        "mysql://root@127.0.0.1:3306/agentledger_bench")  # fmt: skip
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("benchmarks/results"),
        help="folder for results.json, results.md and the chart (default: benchmarks/results)",
    )
    parser.add_argument("--chart", type=Path, help="where the PNG goes (default: OUT/ratios.png)")
    parser.add_argument("--seed", type=int, default=20261129, help="seed of the shuffles")
    parser.add_argument(
        "--from-json",
        type=Path,
        help="run nothing: render results.md and the chart again from this results.json",
    )
    return parser


def _render(results: list[dict[str, Any]], config_name: str, args: argparse.Namespace) -> None:
    servers = {r["dialect"]: r["server"] for r in results if r.get("server")}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    text = markdown(results, config_name, servers)
    (args.out / "results.md").write_text(text)
    picture = args.chart or args.out / "ratios.png"
    drew = chart(results, picture)
    print(text)
    missed = [t for result in results for t in targets(result) if not t.met]
    where = f", chart {picture}" if drew else ", no chart (pip install -e '.[bench]')"
    print(f"{len(missed)} target(s) missed; results in {args.out}{where}", file=sys.stderr)


def _server_version(dialect: str, url: URL) -> str:
    engine = create_engine(sync_url(dialect, url), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            return str(connection.exec_driver_sql("SELECT version()").scalar_one())
    finally:
        engine.dispose()


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    config = QUICK if args.quick else FULL
    if args.from_json is not None:
        results = json.loads(args.from_json.read_text())
        _render(results, results[0].get("config", config.name), args)
        return 0
    wanted = [name.strip() for name in args.databases.split(",") if name.strip()]
    parts = [name.strip() for name in args.parts.split(",") if name.strip()]
    unknown = set(wanted) - set(DATABASES) | set(parts) - set(PARTS)
    if unknown:
        print(f"unknown databases or parts: {sorted(unknown)}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    if "core" in parts:
        _core(wanted, config, args)
    if "conversations" in parts:
        _conversations(wanted, args)
    if "langgraph" in parts:
        _langgraph(wanted, args)
    if "budget" in parts:
        _budget(wanted, args)
    print(f"{time.perf_counter() - started:.0f} s in all", file=sys.stderr)
    return 0


def _core(wanted: list[str], config: Config, args: argparse.Namespace) -> None:
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="agentledger-bench-") as folder:
        for dialect in wanted:
            if dialect == "sqlite":
                url = make_url(f"sqlite:///{folder}/bench.db")
            else:
                url = server_url(
                    dialect, args.postgres_url if dialect == "postgresql" else args.mysql_url
                )
            result = asyncio.run(run_database(dialect, url, config, args.seed))
            result["config"] = config.name
            if dialect != "sqlite":
                result["server"] = _server_version(dialect, url).split(" on ")[0]
            results.append(result)
    _render(results, config.name, args)


def _conversations(wanted: list[str], args: argparse.Namespace) -> None:
    """The conversation cells beside the frameworks' stores (SQLite and PostgreSQL)."""
    dialects = [name for name in wanted if name in ("sqlite", "postgresql")]
    postgres = None
    if args.postgres_url is not None:
        named = make_url(args.postgres_url)
        postgres = named.set(database=f"{named.database}_conversations").render_as_string(
            hide_password=False
        )
    results = conversations.run(dialects, quick=args.quick, postgres_url=postgres, seed=args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "conversations.json").write_text(json.dumps(results, indent=2) + "\n")
    tables = conversations.markdown(results) + "\n" + conversations.integrations_markdown(results)
    (args.out / "conversations.md").write_text(tables)
    drew = conversations.chart(results, args.out / "conversations.png")
    print("## Conversations beside the frameworks' stores\n\n" + tables)
    where = f", chart {args.out / 'conversations.png'}" if drew else ""
    print(f"conversations: results in {args.out}{where}", file=sys.stderr)


def _langgraph(wanted: list[str], args: argparse.Namespace) -> None:
    """agentledger's LangGraph saver beside LangGraph's own, and the issue's targets."""
    from . import langgraph  # LangGraph's savers are in the bench extra only

    steps, rounds = LANGGRAPH_QUICK if args.quick else LANGGRAPH_FULL
    postgres = None
    if "postgresql" in wanted:
        named = server_url("postgresql", args.postgres_url)
        postgres = named.set(database=f"{named.database}_lg").render_as_string(hide_password=False)
    results = langgraph.run(steps, rounds, postgres, args.seed)
    found = langgraph.targets(results)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "langgraph.json").write_text(
        json.dumps({"results": results, "targets": found}, indent=1) + "\n"
    )
    tables = langgraph.markdown(results) + "\n" + langgraph.targets_markdown(found)
    print("## LangGraph: agentledger's saver beside LangGraph's\n\n" + tables)


def _budget(wanted: list[str], args: argparse.Namespace) -> None:
    """A ledger call's and two saver calls' time, layer by layer (SQLite, PostgreSQL)."""
    from . import per_call, saver_budget  # LangGraph's savers are in the bench extra only

    rounds = BUDGET_ROUNDS[1] if args.quick else BUDGET_ROUNDS[0]
    postgres = None
    if "postgresql" in wanted:
        named = server_url("postgresql", args.postgres_url)
        postgres = named.set(drivername="postgresql+psycopg", database=f"{named.database}_budget")
    ledger_call = per_call.run(
        rounds, args.seed, None if postgres is None else postgres.render_as_string(False)
    )
    saver_calls = {"SQLite": saver_budget.measure("sqlite", None, rounds, args.seed)}
    if postgres is not None:
        # A database of its own: the ledger call's part still holds connections to its.
        saver_database = postgres.set(database=f"{postgres.database}_saver")
        saver_calls["PostgreSQL"] = saver_budget.measure(
            "postgresql", saver_database.render_as_string(False), rounds, args.seed
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "budget.json").write_text(
        json.dumps({"messages.all": ledger_call, "saver": saver_calls}, indent=1) + "\n"
    )
    print(
        "## One ledger call, layer by layer (`messages.all` of 10)\n\n"
        + per_call.markdown(ledger_call)
        + "\n## Two saver calls, layer by layer\n\n"
        + saver_budget.markdown(saver_calls)
    )
