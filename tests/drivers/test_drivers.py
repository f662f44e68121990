"""Every driver SQLAlchemy offers for PostgreSQL and MariaDB/MySQL runs agentledger.

One short scenario per server backend x mode of the registry (tests/backends.py): the
migrations, a create, a record-checked append, a stale append that must conflict (the
version check depends on the driver reporting the rows an UPDATE matched), steps, and
a checkpoint saved and read back as the latest; then the errors agentledger reads
codes from (a taken id, the server's serialization failure), since each driver
carries SQLSTATE or errno its own way. The contract suite covers the drivers
agentledger picks itself in depth; this keeps the others working.
"""

from __future__ import annotations

import inspect
import itertools
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from agentledger import (
    AsyncLedger,
    CheckpointPayload,
    ConflictError,
    Ledger,
    NewMessage,
    NewStep,
    TokenUsage,
)
from agentledger._translate import translate
from agentledger.engine import resolve_url
from agentledger.testing import SyncAdapter

from ..backends import BACKENDS, Backend
from ..databases import IN_CI, dialect_params, scratch_database

_SERVER_BACKENDS = [backend for backend in BACKENDS if backend.dialect != "sqlite"]
_MARKS = {param.id: param.marks for param in dialect_params("postgresql", "mysql")}


def _params() -> list[Any]:
    return [
        pytest.param((backend, mode), id=f"{backend.name}-{mode}", marks=_MARKS[backend.dialect])
        for backend in _SERVER_BACKENDS
        for mode in backend.modes
    ]


def _needs_driver(backend: Backend) -> None:
    if backend.installed():
        return
    message = backend.missing()
    if IN_CI:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


_URL_PAGE = Path(__file__).resolve().parents[2] / "docs" / "connecting.md"
_DRIVER_NAMES = {
    "sqlite3": "pysqlite",
    "aiosqlite": "aiosqlite",
    "psycopg 3": "psycopg",
    "psycopg 3 (async)": "psycopg_async",
    "asyncpg": "asyncpg",
    "pg8000": "pg8000",
    "psycopg2": "psycopg2",
    "PyMySQL": "pymysql",
    "aiomysql": "aiomysql",
    "mysqlclient": "mysqldb",
    "mysql-connector-python": "mysqlconnector",
    "asyncmy": "asyncmy",
}
_HAS_READ_ONLY_UNITS = "readonly" in inspect.signature(Ledger.unit_of_work).parameters
_SERIALIZATION_FAILURE = {
    "postgresql": "DO $$BEGIN RAISE EXCEPTION USING ERRCODE = '40001'; END$$",
    "mysql": "SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = 'deadlock'",
}


def _documented_url_table() -> list[tuple[str, str, str]]:
    """(URL, Ledger's driver, AsyncLedger's driver) for every URL in docs/connecting.md's table."""
    lines = _URL_PAGE.read_text().splitlines()
    start = lines.index("| URL | `Ledger` uses | `AsyncLedger` uses | installed by |") + 2
    rows = []
    for line in itertools.takewhile(lambda line: line.startswith("|"), lines[start:]):
        urls, sync, async_, _installed = (cell.strip() for cell in line.strip("|").split("|"))
        for url in re.findall(r"`([^`]+)`", urls):
            rows.append((url, _DRIVER_NAMES[sync], _DRIVER_NAMES[async_]))
    return rows


@pytest.mark.parametrize(("url", "sync", "async_"), _documented_url_table())
def test_each_url_form_documented_picks_the_driver_it_names(
    url: str, sync: str, async_: str
) -> None:
    assert resolve_url(url, asynchronous=False).drivername.endswith(f"+{sync}")
    assert resolve_url(url, asynchronous=True).drivername.endswith(f"+{async_}")


def test_the_docs_name_exactly_the_drivers_of_the_registry() -> None:
    named = {driver for _url, sync, async_ in _documented_url_table() for driver in (sync, async_)}
    registered = {
        driver
        for backend in BACKENDS
        for driver in (backend.sync_driver, backend.async_driver)
        if driver is not None
    }
    assert registered == named


@pytest.fixture(params=_params())
async def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """A ledger on a new, empty database, through one backend's driver for one mode,
    migrated through that driver."""
    backend, mode = request.param
    _needs_driver(backend)
    with scratch_database(backend.dialect, str(tmp_path)) as base:
        url: URL = backend.url_for(base, mode)
        opened: Any = AsyncLedger(url) if mode == "async" else SyncAdapter(Ledger(url))
        try:
            assert opened.engine.url.drivername == url.drivername
            await opened.upgrade()
            yield opened
        finally:
            await opened.close()


async def test_the_smoke_scenario_runs_through_the_driver(ledger: Any) -> None:
    session = await ledger.sessions.create("smoke", state={"turns": 0})
    appended = await ledger.messages.append(session, NewMessage(role="user", content="hi"))
    assert appended.session.revision == session.revision + 1

    with pytest.raises(ConflictError) as stale:
        await ledger.messages.append(session, NewMessage(role="user", content="late"))
    assert stale.value.reason == "stale"

    usage = TokenUsage(input_tokens=3, output_tokens=2, total_tokens=5)
    steps = await ledger.steps.append(
        session.id, [NewStep(kind="model", usage=usage), NewStep(kind="tool")]
    )
    assert [step.seq for step in steps] == [1, 2]
    assert (await ledger.steps.usage(session_id=session.id)).total_tokens == 5

    saved = await ledger.checkpoints.save(
        session.id, CheckpointPayload(context_window=[NewMessage(role="user", content="hi")])
    )
    latest = await ledger.checkpoints.latest(session.id)
    assert latest is not None and latest.ref == saved.ref
    assert [m.content for m in (await ledger.messages.all(session.id))] == ["hi"]


async def test_a_taken_id_is_a_conflict_through_the_driver(ledger: Any) -> None:
    await ledger.sessions.create("taken")

    with pytest.raises(ConflictError) as taken:
        await ledger.sessions.create("taken")
    assert taken.value.reason == "exists"


async def test_the_server_s_serialization_failure_is_retryable_through_the_driver(
    ledger: Any,
) -> None:
    engine = ledger.engine
    statement = text(_SERIALIZATION_FAILURE[engine.dialect.name])
    with pytest.raises(sa_exc.DBAPIError) as raised:
        if isinstance(engine, AsyncEngine):
            async with engine.connect() as connection:
                await connection.execute(statement)
        else:
            with engine.connect() as connection:
                connection.execute(statement)

    translated = translate(raised.value, engine.url)
    assert isinstance(translated, ConflictError) and translated.reason == "serialization"
    assert translated.retryable


@pytest.mark.skipif(
    not _HAS_READ_ONLY_UNITS, reason="Ledger.unit_of_work(readonly=True) is not in this version yet"
)
async def test_a_read_only_unit_of_work_reads_through_the_driver(ledger: Any) -> None:
    session = await ledger.sessions.create("smoke-read")
    await ledger.messages.append(session, NewMessage(role="user", content="hi"))

    async with ledger.unit_of_work(readonly=True) as uow:
        read = await uow.sessions.get("smoke-read")
        messages = await uow.messages.all("smoke-read")

    assert read.message_count == 1 and [m.content for m in messages] == ["hi"]
