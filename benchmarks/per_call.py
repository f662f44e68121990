"""The per-call budget: where the time of one small ledger call goes, layer by layer.

One read, a whole conversation of 10 messages (``messages.all``), is timed through a
ladder of floors that each add one layer to the one before, in interleaved rounds
(every rung once per round, shuffled, after untimed warm-up rounds):

1. ``driver``: the plain driver on one held connection, the same SELECT, the rows
   decoded as the library decodes them (JSON through ``agentledger._json.loads``, times
   aware in UTC), no records;
2. ``core held``: SQLAlchemy Core on one held Connection, the library's own prebuilt
   statement, its rows made records (``messages_of``): SQLAlchemy's execution layer and
   the records;
3. ``core pooled``: the same, with a connection checked out of the pool and returned
   for each call;
4. ``core transaction``: the same, inside ``engine.begin()`` (BEGIN and COMMIT);
5. ``orm session``: the same, through a plain ORM Session (what the unit of work
   wraps), committed and closed;
6. ``agentledger``: ``ledger.messages.all(id)``: the unit of work, retry scaffolding,
   checks and the ledger's own transport choice (on some databases driver SQL, on
   SQLite a read that runs as one statement).

The sync ``Ledger`` runs on SQLite (a file) and PostgreSQL (psycopg); the async
``AsyncLedger`` on PostgreSQL (asyncpg), where each rung runs through SQLAlchemy's
async adapter (the greenlet hop is part of rung 2 there). Nothing is judged: each
rung's median and the step from the rung below it are reported, in microseconds.

    python -m benchmarks.per_call [--rounds 2000] [--postgres-url URL] [--no-postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from agentledger import AsyncLedger, Ledger, migrations
from agentledger._json import loads
from agentledger.repositories.messages import _LOG, messages_of

from .seed import server_url

CONVERSATION = "per-call"
"""The conversation each ledger reads (the async run reads one of its own)."""
LENGTH = 10
RUNGS = ("driver", "core held", "core pooled", "core transaction", "orm session", "agentledger")
RAW_SELECT = (
    "SELECT seq, role, content{text}, metadata{text}, created_at, external_key "
    "FROM agentledger_messages WHERE session_id = {p} ORDER BY seq"
)
"""PostgreSQL's drivers decode jsonb themselves: the floor reads it as text, as the
library does, and decodes it the same way."""
STATEMENT = _LOG._all


def _message(n: int) -> dict[str, Any]:
    return {"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n} of ten"}


def _decoded(rows: list[Any], time_of: Callable[[Any], datetime]) -> list[tuple[Any, ...]]:
    return [(r[0], r[1], loads(r[2]), loads(r[3]), time_of(r[4]), r[5]) for r in rows]


def _sqlite_time(text: str) -> datetime:
    return datetime.fromisoformat(text + "+00:00")


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is UTC else value.astimezone(UTC)


def _sync_rungs(url: str) -> dict[str, Callable[[], Any]]:
    """The six rungs on a sync engine (SQLite or psycopg)."""
    ledger = Ledger(url)
    ledger.sessions.create(CONVERSATION)
    ledger.messages.append(CONVERSATION, [_message(n) for n in range(LENGTH)])
    engine = create_engine(make_url(url))
    held = engine.connect()
    params = {"id": CONVERSATION}
    if engine.dialect.name == "sqlite":
        path = make_url(url).database
        assert path is not None
        raw: Any = sqlite3.connect(path, isolation_level=None)
        select = RAW_SELECT.format(p="?", text="")

        def driver() -> Any:
            return _decoded(raw.execute(select, (CONVERSATION,)).fetchall(), _sqlite_time)

    else:
        import psycopg

        raw = psycopg.connect(
            make_url(url).set(drivername="postgresql").render_as_string(hide_password=False),
            autocommit=True,
        )
        select = RAW_SELECT.format(p="%s", text="::text")

        def driver() -> Any:
            rows = raw.execute(select, (CONVERSATION,)).fetchall()
            return _decoded(rows, _aware)

    def core_held() -> Any:
        return messages_of(held.execute(STATEMENT, params).all(), CONVERSATION)

    def core_pooled() -> Any:
        with engine.connect() as connection:
            return messages_of(connection.execute(STATEMENT, params).all(), CONVERSATION)

    def core_transaction() -> Any:
        with engine.begin() as connection:
            return messages_of(connection.execute(STATEMENT, params).all(), CONVERSATION)

    def orm_session() -> Any:
        with Session(engine, expire_on_commit=False) as session:
            rows = session.execute(STATEMENT, params).all()
            session.commit()
            return messages_of(rows, CONVERSATION)

    return dict(
        zip(
            RUNGS,
            (
                driver,
                core_held,
                core_pooled,
                core_transaction,
                orm_session,
                lambda: ledger.messages.all(CONVERSATION),
            ),
            strict=True,
        )
    )


def _timed_sync(rungs: dict[str, Callable[[], Any]], rounds: int, seed: int) -> dict[str, float]:
    shuffle = random.Random(seed)
    samples: dict[str, list[float]] = {name: [] for name in rungs}
    warmup = max(1, rounds // 10)
    for index in range(warmup + rounds):
        for name in shuffle.sample(list(rungs), len(rungs)):
            begin = time.perf_counter()
            rungs[name]()
            if index >= warmup:
                samples[name].append(time.perf_counter() - begin)
    return {name: statistics.median(found) * 1e6 for name, found in samples.items()}


async def _timed_async(url: str, rounds: int, seed: int) -> dict[str, float]:
    """The six rungs on asyncpg through SQLAlchemy's async adapter."""
    import asyncpg

    conversation = f"{CONVERSATION}-async"

    ledger = AsyncLedger(url)
    await ledger.sessions.create(conversation)
    await ledger.messages.append(conversation, [_message(n) for n in range(LENGTH)])
    engine = create_async_engine(make_url(url))
    held = await engine.connect()
    plain = make_url(url)
    raw = await asyncpg.connect(
        host=plain.host, port=plain.port, user=plain.username, database=plain.database
    )
    select = RAW_SELECT.format(p="$1", text="::text")
    params = {"id": conversation}

    async def driver() -> Any:
        return _decoded(await raw.fetch(select, conversation), _aware)

    async def core_held() -> Any:
        return messages_of((await held.execute(STATEMENT, params)).all(), conversation)

    async def core_pooled() -> Any:
        async with engine.connect() as connection:
            rows = (await connection.execute(STATEMENT, params)).all()
        return messages_of(rows, conversation)

    async def core_transaction() -> Any:
        async with engine.begin() as connection:
            rows = (await connection.execute(STATEMENT, params)).all()
        return messages_of(rows, conversation)

    async def orm_session() -> Any:
        async with AsyncSession(engine, expire_on_commit=False) as session:
            rows = (await session.execute(STATEMENT, params)).all()
            await session.commit()
        return messages_of(rows, conversation)

    async def agentledger() -> Any:
        return await ledger.messages.all(conversation)

    rungs: dict[str, Callable[[], Awaitable[Any]]] = dict(
        zip(
            RUNGS,
            (driver, core_held, core_pooled, core_transaction, orm_session, agentledger),
            strict=True,
        )
    )
    shuffle = random.Random(seed)
    samples: dict[str, list[float]] = {name: [] for name in rungs}
    warmup = max(1, rounds // 10)
    try:
        for index in range(warmup + rounds):
            for name in shuffle.sample(list(rungs), len(rungs)):
                begin = time.perf_counter()
                await rungs[name]()
                if index >= warmup:
                    samples[name].append(time.perf_counter() - begin)
    finally:
        await raw.close()
        await held.close()
        await engine.dispose()
        await ledger.close()
    return {name: statistics.median(found) * 1e6 for name, found in samples.items()}


def markdown(results: dict[str, dict[str, float]]) -> str:
    """Each rung's median and what it adds to the rung below, in microseconds."""
    names = list(results)
    lines = [
        "| rung | " + " | ".join(f"{name} (us) | adds" for name in names) + " |",
        "| --- | " + " | ".join("---: | ---:" for _ in names) + " |",
    ]
    for index, rung in enumerate(RUNGS):
        cells = []
        for name in names:
            value = results[name][rung]
            step = value - results[name][RUNGS[index - 1]] if index else value
            cells.append(f"{value:.0f} | {step:+.0f}" if index else f"{value:.0f} | ")
        lines.append(f"| {rung} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _fresh_postgres(url: str) -> str:
    from .seed import recreate_database

    recreate_database("postgresql", make_url(url))
    migrations.upgrade(make_url(url).set(drivername="postgresql+psycopg"))
    return url


def run(rounds: int, seed: int, postgres_url: str | None) -> dict[str, dict[str, float]]:
    """Every rung on SQLite and, given a PostgreSQL database it may drop and create, on
    PostgreSQL (psycopg and asyncpg): medians in microseconds."""
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="agentledger-per-call-") as folder:
        sqlite_url = f"sqlite:///{folder}/per_call.db"
        migrations.upgrade(sqlite_url)
        results["SQLite, Ledger"] = _timed_sync(_sync_rungs(sqlite_url), rounds, seed)
    if postgres_url is not None:
        plain = make_url(_fresh_postgres(postgres_url))
        psycopg_url = plain.set(drivername="postgresql+psycopg").render_as_string(
            hide_password=False
        )
        results["PostgreSQL, Ledger"] = _timed_sync(_sync_rungs(psycopg_url), rounds, seed)
        asyncpg_url = plain.set(drivername="postgresql+asyncpg").render_as_string(
            hide_password=False
        )
        results["PostgreSQL, AsyncLedger"] = asyncio.run(_timed_async(asyncpg_url, rounds, seed))
    return results


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.per_call")
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--postgres-url",
        default=None,
        help="a database it may drop and create (default: agentledger_bench_per_call)",
    )
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--out", default=None, help="also write the medians here (JSON)")
    options = parser.parse_args(argv)
    url = None
    if not options.no_postgres:
        url = options.postgres_url or server_url("postgresql", None).set(
            database="agentledger_bench_per_call"
        ).render_as_string(hide_password=False)
    results = run(options.rounds, options.seed, url)
    if options.out is not None:
        with open(options.out, "w") as out:
            json.dump(results, out, indent=2)
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
