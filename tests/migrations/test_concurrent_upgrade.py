"""Four processes upgrading one fresh database at once all succeed (research B5, T13)."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, func, select, table
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger import migrations
from agentledger.models import VERSION_TABLE

from ._support import OUR_TABLES, drift, our_table_names, upgrade_together

PROCESSES = 4


def _version_rows(url: URL) -> int:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            count = select(func.count()).select_from(table(VERSION_TABLE))
            return int(connection.execute(count).scalar_one())
    finally:
        engine.dispose()


@pytest.mark.slow
def test_four_processes_upgrading_one_fresh_database_all_succeed(scratch_url: URL) -> None:
    target = scratch_url.render_as_string(hide_password=False)
    results = upgrade_together([target] * PROCESSES)

    failures = [error for code, _, error in results if code]
    assert not failures, "\n".join(failures)
    assert [out.strip() for _, out, _ in results] == [migrations.head()] * PROCESSES
    assert our_table_names(scratch_url) == OUR_TABLES | {VERSION_TABLE}
    assert _version_rows(scratch_url) == 1
    assert drift(scratch_url) == []
