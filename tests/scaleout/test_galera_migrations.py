"""Migrations on a three-node Galera cluster: GET_LOCK is node-local there, so upgraders
on different nodes take turns by a lease row the cluster certifies instead."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger import migrations
from agentledger.migrations.locks import LEASE_TABLE
from agentledger.models import VERSION_TABLE

from ..migrations._support import OUR_TABLES, drift, our_table_names, upgrade_together

# mysql: with the other MariaDB-only tests in a run of their own (dev.py's lanes).
pytestmark = [pytest.mark.slow, pytest.mark.mysql]


def test_three_upgrades_at_once_one_per_node_all_succeed(node_urls: list[URL]) -> None:
    targets = [url.render_as_string(hide_password=False) for url in node_urls]
    results = upgrade_together(targets)

    failures = [error for code, _, error in results if code]
    assert not failures, "\n".join(failures)
    assert [out.strip() for _, out, _ in results] == [migrations.head()] * len(targets)
    for url in node_urls:
        assert our_table_names(url) == OUR_TABLES | {VERSION_TABLE, LEASE_TABLE}
        assert drift(url) == []


def test_the_lease_is_given_back_after_the_run(node_urls: list[URL]) -> None:
    migrations.upgrade(node_urls[1])
    engine = create_engine(node_urls[2], poolclass=NullPool)
    try:
        with engine.connect() as connection:
            connection.execute(text("SET SESSION wsrep_sync_wait = 1"))
            assert LEASE_TABLE in inspect(connection).get_table_names()
            rows = connection.execute(text(f"SELECT COUNT(*) FROM {LEASE_TABLE}")).scalar()
    finally:
        engine.dispose()
    assert rows == 0
