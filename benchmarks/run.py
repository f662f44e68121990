"""Run the benchmark on one database: set up, time every operation interleaved, count.

Timing: each operation's three variants run in one process, one call each per round
in a shuffled order, after untimed warm-up rounds, so the machine's noise lands on all
of them alike. Nothing here asserts a time: the numbers are reported, never judged
by a test.
"""

from __future__ import annotations

import asyncio
import gc
import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL

from agentledger import AsyncLedger, SessionRecord

from . import ops
from .ops import Call, Conflict, CoreAppend, Floors, LedgerAppend, RawAppend, View
from .raw import RawConnection
from .seed import Seeder, bytes_per_row, migrate, recreate_database, stored_bytes

VARIANTS = ("agentledger", "core", "raw")
STREAMED = ("agentledger", "raw")
"""The variants whose streaming memory is measured (each a process reading every step
of the long trace; the Core floor's added nothing but minutes)."""
RUN_RETRIES = 50
"""ledger.run's retries for the contending writers: enough that none gives up, so the
run shows how many tries an item needed."""
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Config:
    """Sizes and repetitions; ``full`` is the recorded run, ``quick`` the smoke test."""

    name: str
    append_sizes: tuple[int, ...]
    load_size: int
    listing_sessions: int
    checkpoint_sizes: tuple[int, ...]
    usage_steps: int
    """Steps of the trace ``usage()`` sums (seeded server-side)."""
    stream_steps: int
    """How many of them the memory check streams (memory is flat after a few pages)."""
    writers: int
    appends_per_writer: int
    bytes_messages: int
    rounds: dict[str, int] = field(default_factory=dict)
    warmup_share: float = 0.1

    def rounds_of(self, group: str) -> tuple[int, int]:
        timed = self.rounds[group]
        return timed, max(1, int(timed * self.warmup_share))


FULL = Config(
    name="full",
    append_sizes=(10, 1_000, 10_000),
    load_size=10_000,
    listing_sessions=100_000,
    checkpoint_sizes=(100_000, 5_000_000),
    usage_steps=1_000_000,
    # Streaming all million took 8 of the run's 14 minutes, with nothing more to show.
    stream_steps=200_000,
    writers=8,
    appends_per_writer=25,
    bytes_messages=2_000,
    # Sized so the whole run stays under 10 minutes on the 2-core CI machine.
    rounds={
        "append": 150,
        "step": 150,
        "steps": 60,
        "load_all": 15,
        "load_last": 150,
        "usage": 6,
        "list": 120,
        "checkpoint_small": 60,
        "checkpoint_large": 8,
    },
)
QUICK = Config(
    name="quick",
    append_sizes=(10, 100, 1_000),
    load_size=1_000,
    listing_sessions=2_000,
    checkpoint_sizes=(100_000, 1_000_000),
    usage_steps=5_000,
    stream_steps=5_000,
    writers=8,
    appends_per_writer=3,
    bytes_messages=100,
    rounds={
        "append": 6,
        "step": 6,
        "steps": 4,
        "load_all": 3,
        "load_last": 6,
        "usage": 3,
        "list": 6,
        "checkpoint_small": 4,
        "checkpoint_large": 2,
    },
    warmup_share=0.34,
)


def _conversation(ledger: AsyncLedger, id: str, last: int | None) -> Call:
    async def call() -> Any:
        return await ledger.messages.conversation(id, last=last)

    return call


def _size(number: int) -> str:
    if number >= 1_000_000 and number % 1_000_000 == 0:
        return f"{number // 1_000_000} MB"
    if number >= 1_000 and number % 1_000 == 0 and number < 1_000_000:
        return f"{number // 1_000} KB"
    return f"{number:,}"


@dataclass
class Op:
    """One operation: its three variants and how many rounds to time."""

    key: str
    label: str
    group: str
    variants: dict[str, Call]
    kind: str  # "write" or "read"
    after_round: Callable[[], Awaitable[None]] | None = None


class StatementCounter:
    """Counts statements on the ledger's engine (BEGIN, COMMIT, ROLLBACK not counted),
    and whether any ran inside a driver-level transaction on PostgreSQL."""

    def __init__(self, ledger: AsyncLedger) -> None:
        self.count = 0
        self.in_transaction = 0
        self.active = False
        event.listen(ledger.engine.sync_engine, "before_cursor_execute", self._seen)

    def _seen(self, conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if not self.active:
            return
        word = statement.lstrip().split(None, 1)[0].upper()
        if word in ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE"):
            return
        self.count += 1
        adapted = conn.connection.dbapi_connection
        if getattr(adapted, "autocommit", True) is False and conn.dialect.name == "postgresql":
            self.in_transaction += 1

    def start(self) -> None:
        self.count = self.in_transaction = 0
        self.active = True

    def stop(self) -> tuple[int, int]:
        self.active = False
        return self.count, self.in_transaction


def summarise(samples_ns: list[int]) -> dict[str, float]:
    ms = sorted(value / 1e6 for value in samples_ns)
    p95 = statistics.quantiles(ms, n=20, method="inclusive")[18] if len(ms) > 1 else ms[0]
    return {"median": statistics.median(ms), "p95": p95, "n": len(ms)}


async def time_op(op: Op, timed: int, warmup: int, rng: random.Random) -> dict[str, Any]:
    samples: dict[str, list[int]] = {name: [] for name in op.variants}
    order = list(op.variants)
    clock = time.perf_counter_ns
    for round_ in range(warmup + timed):
        rng.shuffle(order)
        for name in order:
            call = op.variants[name]
            started = clock()
            await call()
            elapsed = clock() - started
            if round_ >= warmup:
                samples[name].append(elapsed)
        if op.after_round is not None:
            await op.after_round()
    stats = {name: summarise(values) for name, values in samples.items()}
    ledger = stats["agentledger"]
    return {
        "key": op.key,
        "label": op.label,
        "group": op.group,
        "kind": op.kind,
        "ms": stats,
        "ratio_core": {q: ledger[q] / stats["core"][q] for q in ("median", "p95")},
        "ratio_raw": {q: ledger[q] / stats["raw"][q] for q in ("median", "p95")},
    }


async def count_statements(op: Op, counter: StatementCounter, floors: Floors) -> dict[str, Any]:
    counts: dict[str, int] = {}
    wrapped = 0
    for name in ("agentledger", "core"):
        counter.start()
        await op.variants[name]()
        counts[name], in_tx = counter.stop()
        if name == "agentledger":
            wrapped = in_tx
    before = floors.raw_write.statements + floors.raw_read.statements
    await op.variants["raw"]()
    counts["raw"] = floors.raw_write.statements + floors.raw_read.statements - before
    if op.after_round is not None:
        await op.after_round()
    return {"statements": counts, "pg_statements_in_transaction": wrapped}


class Bench:
    """One database's run: its ledger, its floors, its seeded sessions."""

    def __init__(self, dialect: str, url: URL, config: Config, rng: random.Random) -> None:
        self.dialect = dialect
        self.url = url
        self.config = config
        self.rng = rng
        self.log: Callable[[str], None] = lambda text: print(
            f"[{dialect}] {text}", file=sys.stderr, flush=True
        )

    async def setup(self) -> None:
        config, dialect = self.config, self.dialect
        started = time.perf_counter()
        recreate_database(dialect, self.url)
        migrate(dialect, self.url)
        self.ledger = AsyncLedger(self.url)
        seeder = Seeder(dialect, self.url)
        try:
            seeder.listing_sessions(config.listing_sessions)
            self.append_records: dict[tuple[str, int], SessionRecord] = {}
            for size in config.append_sizes:
                for variant in VARIANTS:
                    id = f"append-{variant}-{size}"
                    await self.ledger.sessions.create(id, title=f"append at {size}")
                    seeder.messages(id, size)
                    self.append_records[(variant, size)] = await self.ledger.sessions.get(id)
            await self.ledger.sessions.create("load", title="a long conversation")
            seeder.messages("load", config.load_size)
            await self.ledger.sessions.create("stream", title="a long trace")
            seeder.steps("stream", config.usage_steps)
            for variant in VARIANTS:
                await self.ledger.sessions.create(f"steps-{variant}")
                for size in config.checkpoint_sizes:
                    await self.ledger.sessions.create(f"checkpoint-{variant}-{size}")
            seeder.analyze()
        finally:
            seeder.close()
        self.raw_write = await RawConnection.open(dialect, self.url)
        self.raw_read = await RawConnection.open(dialect, self.url, autocommit=True)
        self.floors = Floors(dialect, self.ledger, self.raw_write, self.raw_read)
        self.counter = StatementCounter(self.ledger)
        self.deep_cursor, self.deep_after = await self._deep_position()
        self.log(f"set up and seeded in {time.perf_counter() - started:.1f} s")

    async def _deep_position(self) -> tuple[str, tuple[Any, str]]:
        """A cursor 90% of the way down the listing, reached by paging through the API."""
        target = int(self.config.listing_sessions * 0.9)
        seen, cursor = 0, None
        while True:
            page = await self.ledger.sessions.list(
                limit=1000 if seen + 1000 <= target else 50, cursor=cursor
            )
            seen += len(page.items)
            cursor = page.next_cursor
            assert cursor is not None
            if seen >= target:
                last = page.items[-1]
                return cursor, (last.updated_at, last.id)

    async def close(self) -> None:
        await self.raw_write.close()
        await self.raw_read.close()
        await self.ledger.close()

    def operations(self) -> list[Op]:
        floors, ledger, config = self.floors, self.ledger, self.config
        result: list[Op] = []
        for size in config.append_sizes:
            record = self.append_records
            views = {
                v: View(r.id, r.revision, r.message_count, r.message_seq)
                for (v, s), r in record.items()
                if s == size
            }
            result.append(
                Op(
                    key=f"append_message_{size}",
                    label=f"append 1 message @{size:,}",
                    group="append",
                    kind="write",
                    variants={
                        "agentledger": LedgerAppend(floors, record[("agentledger", size)]),
                        "core": CoreAppend(floors, views["core"]),
                        "raw": RawAppend(floors, views["raw"]),
                    },
                )
            )
        for batch, group in ((1, "step"), (100, "steps")):
            result.append(
                Op(
                    key=f"append_steps_{batch}",
                    label=f"append {batch} step{'s' if batch > 1 else ''}",
                    group=group,
                    kind="write",
                    variants={
                        "agentledger": ops.ledger_steps(floors, "steps-agentledger", batch),
                        "core": ops.core_steps(floors, "steps-core", batch),
                        "raw": ops.raw_steps(floors, "steps-raw", batch),
                    },
                )
            )
        for key, last, label, group in (
            ("load_all", None, f"conversation of {config.load_size:,}", "load_all"),
            ("load_last_50", 50, "conversation: last 50", "load_last"),
        ):
            result.append(
                Op(
                    key=key,
                    label=label,
                    group=group,
                    kind="read",
                    variants={
                        "agentledger": _conversation(ledger, "load", last),
                        "core": ops.core_conversation(floors, "load", last),
                        "raw": ops.raw_conversation(floors, "load", last),
                    },
                )
            )
        result.append(
            Op(
                key="usage_steps",
                label=f"usage() over {config.usage_steps:,} steps",
                group="usage",
                kind="read",
                variants={
                    "agentledger": lambda: ledger.steps.usage(session_id="stream"),
                    "core": ops.core_usage(floors, "stream"),
                    "raw": ops.raw_usage(floors, "stream"),
                },
            )
        )
        deep = self.deep_cursor
        result.append(
            Op(
                key="list_first",
                label=f"list 50 of {config.listing_sessions:,}: first page",
                group="list",
                kind="read",
                variants={
                    "agentledger": lambda: ledger.sessions.list(limit=50),
                    "core": ops.core_list(floors, None),
                    "raw": ops.raw_list(floors, None),
                },
            )
        )
        result.append(
            Op(
                key="list_deep",
                label=f"list 50 of {config.listing_sessions:,}: page at 90%",
                group="list",
                kind="read",
                variants={
                    "agentledger": lambda: ledger.sessions.list(limit=50, cursor=deep),
                    "core": ops.core_list(floors, self.deep_after),
                    "raw": ops.raw_list(floors, self.deep_after),
                },
            )
        )
        for size, group in zip(
            config.checkpoint_sizes, ("checkpoint_small", "checkpoint_large"), strict=True
        ):
            payload = ops.checkpoint_payload(size)
            ids = {v: f"checkpoint-{v}-{size}" for v in VARIANTS}
            result.append(
                Op(
                    key=f"checkpoint_save_{size}",
                    label=f"save checkpoint {_size(size)}",
                    group=group,
                    kind="write",
                    variants={
                        "agentledger": ops.ledger_checkpoint_save(
                            floors, ids["agentledger"], payload
                        ),
                        "core": ops.core_checkpoint_save(floors, ids["core"], payload),
                        "raw": ops.raw_checkpoint_save(floors, ids["raw"], payload),
                    },
                    after_round=self._pruner(ids),
                )
            )
            result.append(
                Op(
                    key=f"checkpoint_latest_{size}",
                    label=f"load latest checkpoint {_size(size)}",
                    group=group,
                    kind="read",
                    variants={
                        "agentledger": ops.ledger_checkpoint_latest(floors, ids["agentledger"]),
                        "core": ops.core_checkpoint_latest(floors, ids["core"]),
                        "raw": ops.raw_checkpoint_latest(floors, ids["raw"]),
                    },
                )
            )
        return result

    def _pruner(self, ids: dict[str, str]) -> Callable[[], Awaitable[None]]:
        async def prune() -> None:
            for id in ids.values():
                await self.ledger.checkpoints.prune(id, 1)

        return prune

    async def timings(self) -> list[dict[str, Any]]:
        results = []
        for op in self.operations():
            timed, warmup = self.config.rounds_of(op.group)
            counts = await count_statements(op, self.counter, self.floors)
            gc.collect()
            result = await time_op(op, timed, warmup, self.rng)
            result.update(counts)
            results.append(result)
            ms = result["ms"]
            self.log(
                f"{op.label:<40} ledger {ms['agentledger']['median']:8.3f} ms  "
                f"core {ms['core']['median']:8.3f}  raw {ms['raw']['median']:8.3f}  "
                f"x core {result['ratio_core']['median']:.2f}  "
                f"x raw {result['ratio_raw']['median']:.2f}  "
                f"statements {result['statements']['agentledger']}"
            )
        return results

    # --- 8 concurrent writers -------------------------------------------------------

    async def concurrency(self) -> dict[str, Any]:
        results: dict[str, dict[str, Any]] = {v: {} for v in VARIANTS}
        order = list(VARIANTS)
        for round_ in range(2):
            for variant in order:
                id = f"concurrent-{variant}-{round_}"
                await self.ledger.sessions.create(id)
                started = time.perf_counter()
                conflicts, most_tries = await self._writers(variant, id)
                seconds = time.perf_counter() - started
                check = await self._verify_concurrent(id)
                entry = results[variant]
                entry["appends"] = entry.get("appends", 0) + check["expected"]
                entry["seconds"] = entry.get("seconds", 0.0) + seconds
                entry["conflicts"] = entry.get("conflicts", 0) + conflicts
                entry["max_tries"] = max(entry.get("max_tries", 0), most_tries)
                entry["lost_updates"] = entry.get("lost_updates", 0) + check["lost"]
            order.reverse()
        for entry in results.values():
            entry["appends_per_s"] = entry["appends"] / entry["seconds"]
        self.log(
            "8 writers: "
            + ", ".join(
                f"{v} {e['appends_per_s']:.0f}/s conflicts {e['conflicts']} most tries "
                f"{e['max_tries']} lost {e['lost_updates']}"
                for v, e in results.items()
            )
        )
        return results

    async def _writers(self, variant: str, id: str) -> tuple[int, int]:
        """Run the writers; the conflicts they met and the most tries one item needed."""
        writers, per_writer = self.config.writers, self.config.appends_per_writer
        tries: list[int] = []

        def content(writer: int, n: int) -> dict[str, Any]:
            return {"writer": writer, "n": n, "text": "concurrent append"}

        async def ledger_writer(writer: int) -> None:
            # Through ledger.run: read, append from the record, retried on a conflict
            # with its jittered backoff, as an agent's turn would be.
            for done in range(per_writer):
                attempts = [0]
                message = {"role": "user", "content": content(writer, done)}

                async def item(uow: Any, message: Any = message, attempts: Any = attempts) -> None:
                    attempts[0] += 1
                    record = await uow.sessions.get(id)
                    await uow.messages.append(record, message)

                await self.ledger.run(item, retries=RUN_RETRIES)
                tries.append(attempts[0])

        async def floor_writer(writer: int) -> None:
            view = View(id, 1, 0, 0)
            raw = None
            if variant == "raw":
                raw = await RawConnection.open(self.dialect, self.url)
                appender: CoreAppend | RawAppend = RawAppend(self.floors, view, raw)
            else:
                appender = CoreAppend(self.floors, view)
            await appender.reread()
            attempts = 0
            try:
                while view.appended < per_writer:
                    done = view.appended
                    attempts += 1
                    try:
                        await appender.call_with(content(writer, done))
                        tries.append(attempts)
                        attempts = 0
                    except Conflict:
                        await appender.reread()
            finally:
                if raw is not None:
                    await raw.close()

        worker = ledger_writer if variant == "agentledger" else floor_writer
        await asyncio.gather(*(worker(w) for w in range(writers)))
        return sum(t - 1 for t in tries), max(tries)

    async def _verify_concurrent(self, id: str) -> dict[str, int]:
        """Every acknowledged append is stored exactly once, with contiguous seqs."""
        expected = self.config.writers * self.config.appends_per_writer
        record = await self.ledger.sessions.get(id)
        messages = await self.ledger.messages.all(id)
        stored = {(m.content["writer"], m.content["n"]) for m in messages}
        wanted = {
            (w, n)
            for w in range(self.config.writers)
            for n in range(self.config.appends_per_writer)
        }
        seqs_ok = [m.seq for m in messages] == list(range(1, len(messages) + 1))
        lost = len(wanted - stored)
        if record.message_count != len(messages) or not seqs_ok or len(messages) != expected:
            lost = max(lost, abs(expected - len(messages)), 1)
        return {"expected": expected, "lost": lost}

    # --- storage and memory ---------------------------------------------------------

    async def bytes_per_message(self) -> dict[str, Any]:
        count = self.config.bytes_messages
        record = await self.ledger.sessions.create("bytes")
        before = stored_bytes(self.dialect, self.url, "agentledger_messages")
        payload = 0
        for index in range(count):
            content = ops.message_content(index)
            payload += len(json.dumps(content, separators=(",", ":")).encode())
            message = {"role": "user" if index % 2 else "assistant", "content": content}
            record = (await self.ledger.messages.append(record, message)).session
        after = stored_bytes(self.dialect, self.url, "agentledger_messages")
        stored = (after - before) / count
        if self.dialect == "mysql":
            stored = bytes_per_row(self.dialect, self.url, "agentledger_messages")
        result = {
            "messages": count,
            "stored_bytes_per_message": stored,
            "json_bytes_per_message": payload / count,
            "method": "table size over rows" if self.dialect == "mysql" else "growth",
        }
        self.log(
            f"bytes per message: {result['stored_bytes_per_message']:.0f} stored "
            f"(content JSON {result['json_bytes_per_message']:.0f})"
        )
        return result

    def stream(self) -> dict[str, Any]:
        results = {}
        url = self.url.render_as_string(hide_password=False)
        for variant in STREAMED:
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.stream",
                    self.dialect,
                    url,
                    "stream",
                    variant,
                    str(self.config.stream_steps),
                ],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                raise RuntimeError(f"streaming with {variant} failed:\n{done.stderr}")
            results[variant] = json.loads(done.stdout.strip().splitlines()[-1])
        self.log(
            f"stream {self.config.stream_steps:,} of {self.config.usage_steps:,} steps: "
            + ", ".join(
                f"{v} peak {r['peak_rss_mib']:.0f} MiB (+{r['growth_mib']:.0f}) "
                f"{r['seconds']:.1f} s"
                for v, r in results.items()
            )
        )
        return results


async def run_database(dialect: str, url: URL, config: Config, seed: int) -> dict[str, Any]:
    bench = Bench(dialect, url, config, random.Random(seed))
    await bench.setup()
    try:
        gc.collect()
        gc.freeze()
        operations = await bench.timings()
        concurrency = await bench.concurrency()
        storage = await bench.bytes_per_message()
    finally:
        await bench.close()
        gc.unfreeze()
    stream = bench.stream()
    return {
        "dialect": dialect,
        "operations": operations,
        "concurrency": concurrency,
        "bytes": storage,
        "stream": stream,
    }
