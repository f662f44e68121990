"""The private Galera cluster of a test run (tests/scaleout/galera.py) and the private
PostgreSQL primary with a hot standby (tests/private_standby.py), each started by the
first test that needs it and stopped when the run ends."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import NullPool

from agentledger import Ledger, migrations

from .. import private_standby
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


@pytest.fixture
def ledgers(node_urls: list[URL]) -> Iterator[list[Ledger]]:
    """A ledger per node, on a database migrated once (through node 1)."""
    migrations.upgrade(node_urls[0])
    opened = [Ledger(url) for url in node_urls]
    try:
        yield opened
    finally:
        for ledger in opened:
            ledger.close()


def read_on_each_node(node_urls: list[URL], sql: str) -> list[list[tuple[Any, ...]]]:
    """``sql``'s rows on each node, once the node has applied every commit before it."""
    answers = []
    for url in node_urls:
        engine = create_engine(url, poolclass=NullPool)
        try:
            with engine.connect() as connection:
                connection.execute(text("SET SESSION wsrep_sync_wait = 15"))
                answers.append([tuple(row) for row in connection.execute(text(sql))])
        finally:
            engine.dispose()
    return answers


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


@dataclass
class Standby:
    """A private PostgreSQL primary and its hot standby, with a database made on the
    primary and replicated: their URLs (no driver: each ledger picks its own)."""

    primary: str
    standby: str

    def caught_up(self, timeout: float = 30) -> None:
        """Wait until the standby has replayed everything the primary has written (its
        insert position: the private primary commits without waiting for the flush)."""
        with psycopg.connect(_maintenance(self.primary), autocommit=True) as primary:
            row = primary.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
        assert row is not None
        deadline = time.monotonic() + timeout
        with psycopg.connect(_maintenance(self.standby), autocommit=True) as standby:
            while True:
                query = "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn"
                replayed = standby.execute(query, (row[0],)).fetchone()
                if replayed is not None and replayed[0]:
                    return
                assert time.monotonic() < deadline, f"the standby lags more than {timeout} s"
                time.sleep(0.02)


def _maintenance(url: str) -> str:
    """``url`` naming the server's ``postgres`` database, which exists before the test's
    own has been replayed."""
    return url.rsplit("/", 1)[0] + "/postgres"


@pytest.fixture(scope="session")
def standby() -> Iterator[Standby]:
    missing = private_standby.available()
    if missing is not None:
        message = f"the standby tests need PostgreSQL's binaries for a private standby: {missing}"
        if IN_CI:
            pytest.fail(f"CI=true, but {message}", pytrace=False)
        pytest.skip(message)
    running = private_standby.start("agentledger_standby")
    try:
        with psycopg.connect(_maintenance(running.primary_url), autocommit=True) as connection:
            connection.execute("CREATE DATABASE agentledger_standby")
        pair = Standby(running.primary_url, running.standby_url)
        migrations.upgrade(pair.primary)
        pair.caught_up()
        yield pair
    finally:
        running.close()
