"""A connection lost right after the server committed: the caller is told the outcome
is unknown (``CommitUnknownError``), nothing is replayed blindly (no duplicate row, no
double increment), and a keyed append, whose replay finds the stored rows, is replayed.

A small TCP proxy in front of the server forwards COMMIT, waits for the server's reply
(so the transaction is committed) and closes the client side instead of passing it on.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import URL

from agentledger import AsyncLedger, CommitUnknownError, Ledger, NewMessage

from ..databases import migrated_database
from . import summary

SERVERS = [
    pytest.param("postgresql", marks=pytest.mark.postgresql),
    pytest.param("mysql", marks=pytest.mark.mysql),
]
ASYNC_DRIVER = {"postgresql": "asyncpg", "mysql": "aiomysql"}
_COMMIT = re.compile(rb"(?<![A-Za-z_])COMMIT\b")
"""The COMMIT statement in a query message (not SET AUTOCOMMIT, which drivers send)."""


class CommitCutter:
    """A TCP proxy that, once armed, lets the next COMMIT through and drops the
    connection when the server's reply comes back (the reply never reaches the client)."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.armed = threading.Event()
        self.cuts = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            cutting = threading.Event()
            threading.Thread(target=self._up, args=(client, server, cutting), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, cutting), daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket, cutting: threading.Event) -> None:
        for data in _chunks(client):
            if self.armed.is_set() and _COMMIT.search(data):
                self.armed.clear()
                cutting.set()
            server.sendall(data)
        _close(server, client)

    def _down(self, server: socket.socket, client: socket.socket, cutting: threading.Event) -> None:
        for data in _chunks(server):
            if cutting.is_set():
                self.cuts += 1  # the server has answered the COMMIT: it is committed
                break
            client.sendall(data)
        _close(server, client)

    def close(self) -> None:
        self.listener.close()


def _chunks(sock: socket.socket) -> Iterator[bytes]:
    while True:
        try:
            data = sock.recv(65536)
        except OSError:
            return
        if not data:
            return
        yield data


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()


@pytest.fixture(params=SERVERS)
def proxied(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[URL, CommitCutter]]:
    """A migrated scratch database and its URL through a CommitCutter."""
    with migrated_database(request.param, tmp_path) as url:
        cutter = CommitCutter(url.host or "127.0.0.1", url.port or _default_port(url))
        yield url.set(host="127.0.0.1", port=cutter.port), cutter
        cutter.close()


def _default_port(url: URL) -> int:
    return 5432 if url.get_backend_name() == "postgresql" else 3306


def _async(url: URL) -> URL:
    return url.set(drivername=f"{url.get_backend_name()}+{ASYNC_DRIVER[url.get_backend_name()]}")


def test_a_blind_append_cut_off_after_commit_is_unknown_and_stored_once(
    proxied: tuple[URL, CommitCutter],
) -> None:
    url, cutter = proxied
    with Ledger(url) as ledger:
        ledger.sessions.create("s")
        cutter.armed.set()
        with pytest.raises(CommitUnknownError) as raised:
            ledger.messages.append("s", NewMessage(role="user", content="once"))
        assert not raised.value.retryable
        assert [m.content for m in ledger.messages.all("s")] == ["once"]
        stored = ledger.sessions.get("s")
        assert (stored.message_count, stored.revision) == (1, 2)
    assert cutter.cuts == 1
    summary.add(f"{url.get_backend_name()} commit cut off", cuts=1, replays=0)


def test_run_never_replays_a_unit_of_work_whose_commit_is_unknown(
    proxied: tuple[URL, CommitCutter],
) -> None:
    url, cutter = proxied
    attempts = []

    def count_a_visit(uow: Any) -> None:
        attempts.append(1)
        visits = uow.app_state.get("app").state.get("visits", 0)
        uow.app_state.merge("app", {"set": {"visits": visits + 1}})
        uow.messages.append("s", NewMessage(role="user", content="visit"))

    with Ledger(url) as ledger:
        ledger.sessions.create("s", app_name="app")
        cutter.armed.set()
        with pytest.raises(CommitUnknownError):
            ledger.run(count_a_visit)
        assert ledger.app_state.get("app").state == {"visits": 1}
        assert len(ledger.messages.all("s")) == 1
    assert len(attempts) == 1 and cutter.cuts == 1
    summary.add(f"{url.get_backend_name()} commit cut off", cuts=1, replays=0)


def test_a_keyed_append_cut_off_after_commit_is_replayed_and_finds_its_rows(
    proxied: tuple[URL, CommitCutter],
) -> None:
    url, cutter = proxied
    event = NewMessage(role="user", content="keyed", external_key="event-1")
    with Ledger(url) as ledger:
        session = ledger.sessions.create("s")
        cutter.armed.set()
        done = ledger.messages.append(session, event)
        assert ledger.messages.all("s") == done.messages
        assert ledger.sessions.get("s").revision == 2
    assert cutter.cuts == 1
    summary.add(f"{url.get_backend_name()} commit cut off", cuts=1, replays=1)


async def test_the_async_api_tells_an_unknown_commit_and_replays_only_a_keyed_append(
    proxied: tuple[URL, CommitCutter],
) -> None:
    url, cutter = proxied
    async with AsyncLedger(_async(url)) as ledger:
        session = await ledger.sessions.create("s")
        cutter.armed.set()
        with pytest.raises(CommitUnknownError):
            await ledger.messages.append("s", NewMessage(role="user", content="blind"))
        await ledger.sessions.get("s")  # a new connection (its set-up commits) before arming
        cutter.armed.set()
        keyed = NewMessage(role="user", content="keyed", external_key="event-1")
        done = await ledger.messages.append(session.id, keyed)
        assert [m.content for m in await ledger.messages.all("s")] == ["blind", "keyed"]
        assert done.messages[-1].seq == 2
    assert cutter.cuts == 2
    summary.add(f"{url.get_backend_name()} commit cut off", cuts=2, replays=1)
