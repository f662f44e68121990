"""The async twins run the same implementation through the async drivers."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from agentledger import AsyncLedger, migrations
from agentledger.overview import asession_overview
from agentledger.retention import PurgeItem, aplan_purge, apurge, avacuum
from agentledger.transfer import acopy_ledger, aexport_jsonl, aimport_jsonl

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
            exported = await aexport_jsonl(a, file, batch=2)
            imported = await aimport_jsonl(b, file, batch=2)
            again = await aimport_jsonl(b, file)
            report = await acopy_ledger(b, c, batch=3)
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
        await aplan_purge(ledger, older_than=timedelta(days=30), on_item=planned.append)
        report = await apurge(ledger, older_than=timedelta(days=30), on_item=deleted.append)
        sizes = await avacuum(ledger)

    assert deleted == planned and report.sessions == 5
    assert sizes.after <= sizes.before
    assert snapshot(url)["agentledger_sessions"] == []


async def test_a_session_overview_on_the_async_api(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    migrations.upgrade(url)
    with ledger_at(url) as ledger:
        populate(ledger)
    async with AsyncLedger(url) as ledger:
        view = await asession_overview(ledger, "s-rich", steps=1)

    assert view.session.id == "s-rich"
    assert [m.seq for m in view.messages] == [4, 5]
    assert [s.seq for s in view.steps] == [2]
    assert len(view.grants) == 2 and len(view.checkpoints) == 3
