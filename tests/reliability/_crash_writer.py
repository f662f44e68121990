"""A writer process for the crash tests: units of work until it is killed.

Usage: python -m tests.reliability._crash_writer URL [JOURNAL_MODE]
       python -m tests.reliability._crash_writer --serve

``--serve`` forks the writers instead (``serve``): the tests kill one writer a run, 50
times per journal mode, and starting a Python process that imports agentledger took
most of each run's time.

Each unit of work creates a session whose state declares how many messages and steps
it holds, appends them, and commits; then the writer prints the session id (an
acknowledged commit). With JOURNAL_MODE (SQLite only) the writer borrows an engine in
that journal mode instead of agentledger's WAL set-up.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import traceback
from typing import Any

from sqlalchemy import create_engine, event

from agentledger import Ledger, NewMessage, NewStep, TokenUsage


def _engine(url: str, journal_mode: str) -> Any:
    engine = create_engine(url)

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA journal_mode = {journal_mode}")
        cursor.execute("PRAGMA synchronous = FULL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    return engine


def main(url: str, journal_mode: str | None) -> None:
    ledger = Ledger(engine=_engine(url, journal_mode)) if journal_mode else Ledger(url)
    ledger.sessions.exists("warm-up")
    print("ready", flush=True)
    serial = 0
    while True:
        serial += 1
        size = random.randint(5, 60)
        session_id = f"crash-{random.getrandbits(48):012x}-{serial}"
        with ledger.unit_of_work() as uow:
            record = uow.sessions.create(session_id, state={"declared": size, "blob": "x" * 2000})
            record = uow.messages.append(
                record, [NewMessage(role="user", content=f"m{i} " * 50) for i in range(size)]
            ).session
            uow.steps.append(
                session_id,
                [NewStep(step_index=i, usage=TokenUsage(total_tokens=1)) for i in range(size)],
            )
            uow.sessions.save(record.model_copy(update={"state": {"declared": size, "done": True}}))
        print(session_id, flush=True)


def serve() -> None:
    """Fork a writer per request, everything imported once. On stdin, ``run`` and a JSON
    object (url, journal_mode, out: the file the writer prints to) starts one and
    answers its pid; ``reap PID`` waits for that writer and answers ``killed`` when
    SIGKILL ended it, else its status. Each writer is its own process, with its own
    connections and random seed, killed by the test as an exec'd one would be."""
    print("serving", flush=True)
    for line in sys.stdin:
        verb, _, argument = line.strip().partition(" ")
        if verb == "run":
            request = json.loads(argument)
            pid = os.fork()
            if pid == 0:
                _writer(request)
            print(pid, flush=True)
        elif verb == "reap":
            _, status = os.waitpid(int(argument), 0)
            killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
            print("killed" if killed else f"status {status}", flush=True)


def _writer(request: dict[str, Any]) -> None:
    """The forked writer: its output to its own file, a seed of its own, never back."""
    try:
        out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, 1)
        os.close(out)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        sys.stdout = os.fdopen(1, "w", buffering=1)
        random.seed()
        main(request["url"], request["journal_mode"])
    except BaseException:
        traceback.print_exc()
        os._exit(1)
    os._exit(0)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
