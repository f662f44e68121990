"""The per-call budget of a LangGraph saver call: where its time goes, layer by layer.

Two hot calls of a thread of 10 checkpoints, ``get_tuple`` of the latest checkpoint and
``put_writes`` of one task's two writes (the same task each time: a replace, as
LangGraph's own savers replace it), are timed through a ladder that adds one layer of
agentledger at a time, beside LangGraph's own saver of the same database doing the same
call (the target), in interleaved rounds (every rung once per round, shuffled, after
untimed warm-up rounds):

1. ``statements``: the repository method's body on driver SQL (which both calls take
   on SQLite and PostgreSQL) over one connection held for the whole run, each call in
   a transaction of its own as the ledger runs it (BEGIN and COMMIT on SQLite's write;
   PostgreSQL's one statement and SQLite's read in the driver's autocommit): its
   statements, the checks of its arguments and the assembly of what it returns;
2. ``transport``: the same on ``_driver.transaction``, as the ledger runs it: the
   pool's checkout and return, the autocommit switch and its error handling;
3. ``runner``: through ``LedgerRunner.perform``: the retry scaffolding (a policy read,
   the error classifiers set up) and its checks (no unit of work open here, readers);
4. ``repository``: the public repository call (``ledger.primary.langgraph().get``):
   the ``operation`` decorator and the repository bound to the call's work;
5. ``saver``: ``LedgerSaver.get_tuple`` / ``put_writes``: LangGraph's config read, the
   values serialized or deserialized (``serde``), the ``CheckpointTuple`` built.

    python -m benchmarks.saver_budget [--rounds 3000] [--postgres-url URL] [--no-postgres]

Nothing is judged: each rung's median and what it adds to the rung below, in
microseconds, and the LangGraph saver's median, from one run.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from sqlalchemy.engine import make_url

from agentledger import Ledger, _driver
from agentledger.integrations.langgraph import LedgerSaver
from agentledger.repositories._base import Work
from agentledger.repositories.langgraph import LangGraphRepository

from .langgraph import Thread
from .seed import recreate_database, server_url

RUNGS = ("statements", "transport", "runner", "repository", "saver")
CALLS = ("get_tuple", "put_writes")
LENGTH = 10
TASK = "budget-task"


def _ladder(saver: LedgerSaver, thread: Thread, call: str) -> dict[str, Callable[[], Any]]:
    """The rungs of ``call`` on agentledger's ``saver`` over ``thread``."""
    runner = saver.ledger._runner
    repository: LangGraphRepository = saver._threads
    if call == "get_tuple":
        config: dict[str, Any] = {"configurable": {"thread_id": thread.thread_id}}
        arguments, keywords = tuple(saver._get_arguments(config)), {}  # type: ignore[arg-type]
        method, writes = LangGraphRepository.get, False

        def public() -> Any:
            return saver.get_tuple(config)  # type: ignore[arg-type]

    else:
        writes_of_task = [("messages", ["a message"]), ("step", 1)]
        latest = thread.configs[-1]
        arguments = ()
        keywords = saver._writes_arguments(latest, writes_of_task, TASK, "")  # type: ignore[arg-type]
        method, writes = LangGraphRepository.put_writes, True

        def public() -> Any:
            return saver.put_writes(latest, writes_of_task, TASK, "")  # type: ignore[arg-type]

    body = method.__wrapped__  # type: ignore[attr-defined]
    if not runner._takes_driver(writes):
        raise SystemExit(f"{call} does not run on driver SQL here: this ladder assumes it")
    transport = runner._driver_transaction

    def in_work(work: Any) -> Any:
        return body(repository._within(work), *arguments, **keywords)

    engine = runner.engine
    dialect = engine.dialect
    autocommit = _driver.driver_one_statement(dialect, runner._read_options, writes=writes)
    begin = None if autocommit else _driver.driver_begin_sql(dialect, writes=writes)
    pooled = engine.raw_connection()  # held for the whole run: no checkout per call
    dbapi = pooled.dbapi_connection
    if autocommit:
        _driver.driver_autocommit(dbapi, dialect, True)

    def statements() -> Any:
        # ``_driver.transaction`` on a connection held open, as in its happy path.
        connection = _driver.DriverConnection(
            dbapi, dialect, one_statement=autocommit, commits=autocommit and writes
        )
        if begin is not None:
            cursor = dbapi.cursor()
            cursor.execute(begin)
            cursor.close()
        work = Work(None, runner.settings, writes=writes, joined=False, executor=connection)
        work.one_operation = work.active = True
        found = in_work(work)
        dbapi.commit()
        return found

    def per_call_transport() -> Any:
        with transport(writes, False, []) as work:
            return in_work(work)

    def through_runner() -> Any:
        return runner.perform(writes, in_work, False, True, from_reader=False)

    def through_repository() -> Any:
        return getattr(repository, call if call == "put_writes" else "get")(*arguments, **keywords)

    rungs = dict(
        zip(
            RUNGS,
            (statements, per_call_transport, through_runner, through_repository, public),
            strict=True,
        )
    )
    rungs["close"] = pooled.close
    return rungs


def _reference(saver: BaseCheckpointSaver[Any], thread: Thread, call: str) -> Callable[[], Any]:
    """LangGraph's own saver doing the same ``call``."""
    if call == "get_tuple":
        config = {"configurable": {"thread_id": thread.thread_id}}
        return lambda: saver.get_tuple(config)  # type: ignore[arg-type]
    writes_of_task = [("messages", ["a message"]), ("step", 1)]
    latest = thread.configs[-1]
    return lambda: saver.put_writes(latest, writes_of_task, TASK, "")  # type: ignore[arg-type]


@contextmanager
def _pair(database: str, folder: Path, url: str | None) -> Iterator[tuple[LedgerSaver, Any]]:
    """agentledger's saver and LangGraph's on ``database``, each with a thread of 10."""
    with ExitStack() as stack:
        if database == "sqlite":
            from langgraph.checkpoint.sqlite import SqliteSaver

            ledger = stack.enter_context(Ledger(f"sqlite:///{folder / 'agentledger.db'}"))
            connection = sqlite3.connect(folder / "langgraph.db", check_same_thread=False)
            stack.callback(connection.close)
            # agentledger's SQLite durability: WAL, synchronous=FULL.
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=FULL")
            theirs: Any = SqliteSaver(connection)
        else:
            from langgraph.checkpoint.postgres import PostgresSaver

            assert url is not None
            base = make_url(url)
            recreate_database("postgresql", base)
            ledger = stack.enter_context(Ledger(base))
            theirs = stack.enter_context(
                PostgresSaver.from_conn_string(
                    base.set(drivername="postgresql").render_as_string(False)
                )
            )
        ledger.upgrade()
        theirs.setup()
        yield LedgerSaver(ledger), theirs


def measure(database: str, url: str | None, rounds: int, seed: int) -> dict[str, dict[str, float]]:
    """Each call's rungs and reference on ``database``: medians in microseconds."""
    results: dict[str, dict[str, float]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="agentledger-budget-") as folder,
        _pair(database, Path(folder), url) as (ours, theirs),
    ):
        for call in CALLS:
            ours_thread, their_thread = Thread("ours", ours, int), Thread("theirs", theirs, int)
            for _ in range(LENGTH):
                ours_thread.put()
                their_thread.put()
            rungs = _ladder(ours, ours_thread, call)
            close = rungs.pop("close")
            rungs["langgraph"] = _reference(theirs, their_thread, call)
            try:
                results[call] = _timed(rungs, rounds, seed)
            finally:
                close()
    return results


def _timed(rungs: dict[str, Callable[[], Any]], rounds: int, seed: int) -> dict[str, float]:
    shuffle = random.Random(seed)
    samples: dict[str, list[float]] = {name: [] for name in rungs}
    warmup = max(1, rounds // 10)
    names = list(rungs)
    for index in range(warmup + rounds):
        for name in shuffle.sample(names, len(names)):
            begin = time.perf_counter()
            rungs[name]()
            if index >= warmup:
                samples[name].append(time.perf_counter() - begin)
    return {name: statistics.median(found) * 1e6 for name, found in samples.items()}


def markdown(results: dict[str, dict[str, dict[str, float]]]) -> str:
    """One table per call: each rung's median and what it adds, per database."""
    out = []
    for call in CALLS:
        databases = [name for name in results if call in results[name]]
        out.append(f"`{call}`:\n")
        out.append("| rung | " + " | ".join(f"{name} (us) | adds" for name in databases) + " |")
        out.append("| --- | " + " | ".join("---: | ---:" for _ in databases) + " |")
        for index, rung in enumerate((*RUNGS, "langgraph")):
            cells = []
            for name in databases:
                found = results[name][call]
                value = found[rung]
                if index == 0 or rung == "langgraph":
                    cells.append(f"{value:.0f} | ")
                else:
                    cells.append(f"{value:.0f} | {value - found[RUNGS[index - 1]]:+.0f}")
            label = "LangGraph's own saver" if rung == "langgraph" else rung
            out.append(f"| {label} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.saver_budget")
    parser.add_argument("--rounds", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument(
        "--postgres-url",
        default=None,
        help="a database it may drop and create (default: agentledger_bench_budget)",
    )
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--out", default=None, help="also write the medians here (JSON)")
    options = parser.parse_args(argv)
    results = {"SQLite": measure("sqlite", None, options.rounds, options.seed)}
    if not options.no_postgres:
        url = options.postgres_url or server_url("postgresql", None).set(
            drivername="postgresql+psycopg", database="agentledger_bench_budget"
        ).render_as_string(hide_password=False)
        results["PostgreSQL"] = measure("postgresql", url, options.rounds, options.seed)
    if options.out is not None:
        Path(options.out).write_text(json.dumps(results, indent=2))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
