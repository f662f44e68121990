"""A SQLite file on read-only media (a read-only folder, or a read-only bind mount for
root, whom folder permissions do not stop) opens for reading, on the API and in the
CLI; a write raises PermissionDeniedError and changes nothing."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agentledger import AsyncLedger, Ledger, NewMessage, PermissionDeniedError
from agentledger.cli import main

pytestmark = pytest.mark.sqlite


@contextmanager
def _made_read_only(folder: Path, tmp_path: Path) -> Iterator[Path]:
    """``folder`` seen read-only: chmod for a user, a read-only bind mount for root."""
    if os.geteuid() != 0:
        os.chmod(folder / "ledger.db", 0o444)
        os.chmod(folder, 0o555)
        try:
            yield folder
        finally:
            os.chmod(folder, 0o755)
            os.chmod(folder / "ledger.db", 0o644)
        return
    mounted = tmp_path / "read-only"
    mounted.mkdir()
    commands = [
        ["mount", "--bind", str(folder), str(mounted)],
        ["mount", "-o", "remount,bind,ro", str(mounted)],
    ]
    for command in commands:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            subprocess.run(["umount", str(mounted)], capture_output=True, check=False)
            pytest.skip(f"root cannot make a read-only mount here: {done.stderr.strip()}")
    try:
        yield mounted
    finally:
        subprocess.run(["umount", str(mounted)], check=True)


@pytest.fixture
def read_only_file(tmp_path: Path) -> Iterator[str]:
    """The URL of a ledger file (WAL mode, one session of two messages), read-only."""
    folder = tmp_path / "media"
    folder.mkdir()
    with Ledger(f"sqlite:///{folder / 'ledger.db'}") as ledger:
        ledger.upgrade()
        ledger.sessions.create("kept", title="on read-only media")
        ledger.messages.append("kept", [NewMessage(role="user", content=c) for c in "ab"])
    assert not (folder / "ledger.db-wal").exists()
    with _made_read_only(folder, tmp_path) as seen:
        yield f"sqlite:///{seen / 'ledger.db'}"


def test_a_read_only_sqlite_file_can_be_read(read_only_file: str) -> None:
    with Ledger(read_only_file) as ledger:
        assert [s.id for s in ledger.sessions.list().items] == ["kept"]
        assert [m.content for m in ledger.messages.all("kept")] == ["a", "b"]
        with ledger.unit_of_work(readonly=True) as uow:
            assert uow.sessions.get("kept").message_count == 2


async def test_a_read_only_sqlite_file_can_be_read_on_the_async_api(read_only_file: str) -> None:
    async with AsyncLedger(read_only_file) as ledger:
        assert (await ledger.sessions.get("kept")).title == "on read-only media"


def test_a_write_to_a_read_only_sqlite_file_is_permission_denied(read_only_file: str) -> None:
    with Ledger(read_only_file) as ledger:
        with pytest.raises(PermissionDeniedError) as raised:
            ledger.messages.append("kept", NewMessage(role="user", content="c"))
        assert "read-only" in str(raised.value) and "ledger.db" in str(raised.value)
        with pytest.raises(PermissionDeniedError), ledger.unit_of_work() as uow:
            uow.sessions.create("new")
        assert ledger.sessions.get("kept").message_count == 2


@pytest.mark.parametrize(
    "command",
    [["sessions", "list"], ["db", "check"], ["db", "current"], ["export"]],
    ids=" ".join,
)
def test_the_cli_reads_a_read_only_sqlite_file(
    read_only_file: str, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*command, "--url", read_only_file]) == 0
    assert "error" not in capsys.readouterr().err
