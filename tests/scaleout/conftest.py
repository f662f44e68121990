"""The private Galera cluster of a test run (tests/scaleout/galera.py), started by the
first test that needs it and stopped when the run ends."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import NullPool

from ..databases import IN_CI
from . import galera


@pytest.fixture(scope="session")
def cluster() -> Iterator[galera.Galera]:
    reason = galera.missing()
    if reason is not None:
        message = f"the Galera tests need a cluster here: {reason}"
        if IN_CI:
            pytest.fail(f"CI=true, but {message}", pytrace=False)
        pytest.skip(message)
    running = galera.start()
    try:
        yield running
    finally:
        running.close()


@pytest.fixture
def node_urls(cluster: galera.Galera) -> Iterator[list[URL]]:
    """A fresh database on the cluster, as a URL per node (PyMySQL); dropped afterwards."""
    name = f"agentledger_{uuid.uuid4().hex[:10]}"
    urls = [make_url(url).set(drivername="mysql+pymysql", database=name) for url in cluster.urls]
    servers = [url._replace(database=None) for url in urls]  # URL.set ignores a None
    _on_node(servers[0], f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    for server in servers[1:]:  # each node has applied the CREATE before the test starts
        _on_node(server, "SELECT 1")
    try:
        yield urls
    finally:
        _on_node(servers[0], f"DROP DATABASE IF EXISTS {name}")


def _on_node(url: URL, sql: str) -> None:
    """Run ``sql`` on the node once it has applied what the cluster committed before
    (``wsrep_sync_wait``)."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            connection.execute(text("SET SESSION wsrep_sync_wait = 15"))
            connection.execute(text(sql))
    finally:
        engine.dispose()
