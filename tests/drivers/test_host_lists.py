"""A ledger on a MariaDB/MySQL URL listing several hosts connects to the first that
answers, sync and async (the Galera fail-over behind it:
tests/scaleout/test_galera_node_loss.py)."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import URL

from agentledger import AsyncLedger, DatabaseUnavailableError, Ledger, NewMessage

from ..databases import migrated_once
from ..ports import free_port

pytestmark = pytest.mark.mysql


@pytest.fixture
def server(tmp_path_factory: pytest.TempPathFactory) -> URL:
    return migrated_once("mysql", tmp_path_factory)


def listing(server: URL, *ports: int) -> URL:
    """``server``'s database, through a URL listing 127.0.0.1 at ``ports``."""
    hosts = tuple(f"{server.host or '127.0.0.1'}:{port}" for port in ports)
    return server._replace(host=None, port=None).set(query={"host": hosts})  # set skips None


def test_a_sync_ledger_skips_a_host_that_does_not_answer(server: URL) -> None:
    with Ledger(listing(server, free_port(), server.port or 3306)) as ledger:
        made = ledger.sessions.create()
        ledger.messages.append(made.id, NewMessage(role="user", content="stored"))
        assert [m.content for m in ledger.messages.all(made.id)] == ["stored"]


async def test_an_async_ledger_skips_a_host_that_does_not_answer(server: URL) -> None:
    async with AsyncLedger(listing(server, free_port(), server.port or 3306)) as ledger:
        made = await ledger.sessions.create()
        assert (await ledger.sessions.get(made.id)).id == made.id


def test_when_no_host_answers_the_database_is_unavailable(server: URL) -> None:
    with (
        Ledger(listing(server, free_port(), free_port())) as ledger,
        pytest.raises(DatabaseUnavailableError),
    ):
        ledger.sessions.list()
