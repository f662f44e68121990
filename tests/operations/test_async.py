"""The async twins run the same implementation through the async drivers."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from agentledger import AsyncLedger, migrations
from agentledger.retention import PurgeItem, PurgePolicy
from agentledger.transfer import files

from ..databases import dialect_params, scratch_database
from ._data import Clock, ledger_at, populate, snapshot


@pytest.mark.parametrize("dialect", dialect_params())
async def test_export_import_and_copy_on_the_async_api(tmp_path: Path, dialect: str) -> None:
    source = f"sqlite:///{tmp_path / 'source.db'}"
    migrations.upgrade(source)
    with ledger_at(source) as ledger:
        populate(ledger)
    copied = f"sqlite:///{tmp_path / 'copied.db'}"
    migrations.upgrade(copied)
    file = tmp_path / "out.jsonl"
    with scratch_database(dialect, str(tmp_path)) as target:
        migrations.upgrade(target)
        plain = target.set(drivername=target.get_backend_name())  # asyncpg, aiomysql
        async with AsyncLedger(source) as a, AsyncLedger(plain) as b, AsyncLedger(copied) as c:
            assert b.engine.dialect.driver in ("aiosqlite", "asyncpg", "aiomysql")
            exported = await a.transfer.export_jsonl(file, batch=2)
            imported = await b.transfer.import_jsonl(file, batch=2)
            again = await b.transfer.import_jsonl(file)
            report = await b.transfer.copy_to(c, batch=3)
        assert snapshot(target) == snapshot(source)
    assert snapshot(copied) == snapshot(source)
    assert exported.rows["steps"] == imported.tables["steps"].inserted == 8
    assert again.inserted == 0
    assert report.inserted == sum(exported.rows.values())


async def test_purge_and_vacuum_on_the_async_api(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    migrations.upgrade(url)
    clock = Clock()
    with ledger_at(url, clock) as ledger:
        populate(ledger)
    clock.now += timedelta(days=40)
    planned: list[PurgeItem] = []
    deleted: list[PurgeItem] = []
    async with AsyncLedger(url, clock=clock) as ledger:
        await ledger.retention.plan_purge(
            PurgePolicy(older_than=timedelta(days=30)), on_item=planned.append
        )
        report = await ledger.retention.purge(
            PurgePolicy(older_than=timedelta(days=30)), on_item=deleted.append
        )
        sizes = await ledger.retention.vacuum()

    assert deleted == planned and report.sessions == 5
    assert sizes.after <= sizes.before
    assert snapshot(url)["agentledger_sessions"] == []


async def test_a_session_overview_on_the_async_api(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    migrations.upgrade(url)
    with ledger_at(url) as ledger:
        populate(ledger)
    async with AsyncLedger(url) as ledger:
        view = await ledger.sessions.overview("s-rich", steps=1)

    assert view.session.id == "s-rich"
    assert [m.seq for m in view.messages] == [4, 5]
    assert [s.seq for s in view.steps] == [2]
    assert len(view.grants) == 2 and len(view.checkpoints) == 3


async def test_the_async_export_writes_its_file_off_the_event_loop_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop_thread = threading.get_ident()
    writers: list[int] = []
    opened = files._open_for_writing

    class Recording:
        def __init__(self, stream: Any) -> None:
            self._stream = stream

        def write(self, text: str) -> int:
            writers.append(threading.get_ident())
            return int(self._stream.write(text))

        def close(self) -> None:
            writers.append(threading.get_ident())
            self._stream.close()

    monkeypatch.setattr(
        files, "_open_for_writing", lambda path, compressed: Recording(opened(path, compressed))
    )
    async with AsyncLedger.in_memory() as ledger:
        await ledger.sessions.create("s-1", title="one")
        report = await ledger.transfer.export_jsonl(tmp_path / "out.jsonl.gz")
    assert report.rows["sessions"] == 1
    assert writers and loop_thread not in writers
