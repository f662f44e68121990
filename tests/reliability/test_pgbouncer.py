"""Behind pgbouncer in transaction mode, with the documented engine options, conflicts
are still caught and no update is lost (T15)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import create_async_engine

from agentledger import AsyncLedger, ConflictError, Ledger, migrations
from agentledger.engine import pgbouncer_engine_options

from ..databases import IN_CI, scratch_database
from ..ports import free_port
from . import summary

pytestmark = [pytest.mark.postgresql, pytest.mark.slow]  # starts pgbouncer
WRITERS, ROUNDS = 8, 25
PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


@pytest.fixture(scope="module")
def bounced() -> Iterator[URL]:
    """A scratch database reached through a transaction-mode pgbouncer on a free port."""
    if not os.path.exists(PGBOUNCER):
        message = "pgbouncer is not installed (apt-get install pgbouncer)"
        if IN_CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    # Not under pytest's tmp folder: pgbouncer runs as another user, who cannot enter it.
    work = Path(tempfile.mkdtemp(prefix="agentledger-pgbouncer-"))
    work.chmod(0o777)
    with scratch_database("postgresql", str(work)) as direct:
        migrations.upgrade(direct)
        port = free_port()
        user = direct.username or "postgres"
        (work / "users.txt").write_text(f'"{user}" ""\n')
        (work / "pgbouncer.ini").write_text(
            f"""[databases]
* = host={direct.host or "127.0.0.1"} port={direct.port or 5432}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {work}/users.txt
pool_mode = transaction
server_reset_query = DISCARD ALL
max_client_conn = 200
default_pool_size = 20
ignore_startup_parameters = extra_float_digits,options
logfile = {work}/pgbouncer.log
pidfile = {work}/pgbouncer.pid
"""
        )
        command = [PGBOUNCER, str(work / "pgbouncer.ini")]
        if os.geteuid() == 0:  # pgbouncer refuses to run as root
            command[1:1] = ["-u", "postgres"]
        server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            for _ in range(100):
                with socket.socket() as client:
                    if client.connect_ex(("127.0.0.1", port)) == 0:
                        break
                assert server.poll() is None, server.communicate()[0].decode()
                time.sleep(0.05)
            yield direct.set(host="127.0.0.1", port=port)
        finally:
            server.terminate()
            server.wait(timeout=10)
            shutil.rmtree(work, ignore_errors=True)


def test_sync_writers_through_pgbouncer_lose_no_update(bounced: URL) -> None:
    engine = create_engine(bounced, **pgbouncer_engine_options(asynchronous=False))
    with Ledger(engine=engine) as ledger:
        ledger.sessions.create("bounced-sync", state={"total": 0})

        def writer(_: int) -> int:
            conflicts = 0
            for _ in range(ROUNDS):
                while True:
                    record = ledger.sessions.get("bounced-sync")
                    state = {"total": record.state["total"] + 1}
                    try:
                        ledger.sessions.save(record.model_copy(update={"state": state}))
                        break
                    except ConflictError:
                        conflicts += 1
            return conflicts

        with ThreadPoolExecutor(WRITERS) as pool:
            conflicts = sum(pool.map(writer, range(WRITERS)))
        assert ledger.sessions.get("bounced-sync").state["total"] == WRITERS * ROUNDS
        assert conflicts > 0
    engine.dispose()
    summary.add("pgbouncer (psycopg)", commits=WRITERS * ROUNDS, conflicts=conflicts, lost=0)


async def test_async_writers_through_pgbouncer_lose_no_update(bounced: URL) -> None:
    import asyncio

    url = bounced.set(drivername="postgresql+asyncpg")
    engine = create_async_engine(url, **pgbouncer_engine_options(asynchronous=True))
    async with AsyncLedger(engine=engine) as ledger:
        await ledger.sessions.create("bounced-async", state={"total": 0})

        async def writer() -> int:
            conflicts = 0
            for _ in range(ROUNDS):
                while True:
                    record = await ledger.sessions.get("bounced-async")
                    state = {"total": record.state["total"] + 1}
                    try:
                        await ledger.sessions.save(record.model_copy(update={"state": state}))
                        break
                    except ConflictError:
                        conflicts += 1
            return conflicts

        conflicts = sum(await asyncio.gather(*(writer() for _ in range(WRITERS))))
        assert (await ledger.sessions.get("bounced-async")).state["total"] == WRITERS * ROUNDS
        assert conflicts > 0
    await engine.dispose()
    summary.add("pgbouncer (asyncpg)", commits=WRITERS * ROUNDS, conflicts=conflicts, lost=0)
