"""Stream the first COUNT steps of one session in a fresh process and report its peak
memory.

Run by the benchmark, one process per variant, so each peak (``VmHWM``) belongs to
that variant alone:

    python -m benchmarks.stream DIALECT URL SESSION_ID VARIANT COUNT
"""

from __future__ import annotations

import asyncio
import gc
import json
import resource
import sys
import time
from collections.abc import AsyncGenerator
from typing import Any, cast

from sqlalchemy.engine import make_url

BATCH = 1000


def rss_kib() -> int:
    """The resident set size now, in KiB."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * resource.getpagesize() // 1024


def peak_kib() -> int:
    """This process's peak resident set size, in KiB.

    ``VmHWM`` belongs to the process's own address space, made fresh by exec.
    ``ru_maxrss`` would not do: Linux carries the parent's size at fork into it, so a
    child of a large benchmark process reports the parent's peak.
    """
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # pragma: no cover


async def _ledger(url: str, id: str, wanted: int) -> int:
    from agentledger import AsyncLedger

    count = 0
    async with AsyncLedger(url) as ledger:
        await ledger.steps.count(id)  # connect and check the schema before the baseline
        baseline[0] = rss_kib()
        steps = cast(AsyncGenerator[Any, None], ledger.steps.iterate(id, batch=BATCH))
        async for _step in steps:
            count += 1
            if count == wanted:
                break
        await steps.aclose()  # its last page's transaction ends before the ledger closes
    return count


async def _core(url: str, id: str, wanted: int) -> int:
    from agentledger.engine import create_async_engine_for

    from .ops import STEP_PAGE
    from .raw import loads

    engine = create_async_engine_for(url)
    if engine.dialect.name == "postgresql":
        engine = engine.execution_options(isolation_level="AUTOCOMMIT")
    count, after = 0, 0
    try:
        async with engine.connect() as connection:
            await connection.exec_driver_sql("SELECT 1")
        baseline[0] = rss_kib()
        while True:
            async with engine.connect() as connection:
                params = {"id": id, "after": after, "n": BATCH}
                rows = (await connection.execute(STEP_PAGE, params)).all()
            page = [(*r[:7], loads(r[7]), loads(r[8]), loads(r[9]), *r[10:]) for r in rows]
            count += len(page)
            if len(page) < BATCH or count >= wanted:
                return min(count, wanted)
            after = page[-1][1]
    finally:
        await engine.dispose()


async def _raw(dialect: str, url: str, id: str, wanted: int) -> int:
    from .ops import RAW_STEP_PAGE
    from .raw import RawConnection, from_db_time, loads

    raw = await RawConnection.open(dialect, make_url(url), autocommit=True)
    count, after = 0, 0
    baseline[0] = rss_kib()
    try:
        while True:
            rows = await raw.fetch(RAW_STEP_PAGE, id, after, BATCH)
            page: list[tuple[Any, ...]] = [
                (*r[:7], loads(r[7]), loads(r[8]), loads(r[9]), *r[10:13], loads(r[13]),
                 from_db_time(dialect, r[14]), from_db_time(dialect, r[15]), r[16])
                for r in rows
            ]  # fmt: skip
            count += len(page)
            if len(page) < BATCH or count >= wanted:
                return min(count, wanted)
            after = page[-1][1]
    finally:
        await raw.close()


baseline = [0]


def main(argv: list[str]) -> int:
    dialect, url, id, variant, expected = argv
    wanted = int(expected)
    gc.collect()
    started = time.perf_counter()
    if variant == "agentledger":
        count = asyncio.run(_ledger(url, id, wanted))
    elif variant == "core":
        count = asyncio.run(_core(url, id, wanted))
    else:
        count = asyncio.run(_raw(dialect, url, id, wanted))
    seconds = time.perf_counter() - started
    peak = peak_kib()
    report = {
        "variant": variant,
        "steps": count,
        "seconds": seconds,
        "peak_rss_mib": peak / 1024,
        "baseline_rss_mib": baseline[0] / 1024,
        "growth_mib": (peak - baseline[0]) / 1024,
        "complete": count == int(expected),
    }
    print(json.dumps(report))
    return 0 if count == int(expected) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
