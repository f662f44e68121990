"""A stored checkpoint payload that does not decode raises CorruptRecordError naming the
checkpoint: never None, never skipped in favour of an older one."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from agentledger import AsyncLedger, CheckpointPayload, Ledger, migrations
from agentledger.errors import CorruptRecordError, DatabaseError

pytestmark = pytest.mark.sqlite


def _corrupt(url: str, ref: str, payload: str) -> None:
    with Ledger(url) as ledger, ledger.engine.begin() as connection:  # an out-of-band writer
        connection.execute(
            text("UPDATE agentledger_checkpoints SET payload = :payload WHERE ref = :ref"),
            {"payload": payload, "ref": ref},
        )


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/corrupt.db"
    migrations.upgrade(url)
    return url


def _two_checkpoints(url: str) -> tuple[str, str]:
    with Ledger(url) as ledger:
        ledger.sessions.create("hurt")
        older = ledger.checkpoints.save("hurt", CheckpointPayload(runtime_state={"n": 1}))
        newer = ledger.checkpoints.save("hurt", CheckpointPayload(runtime_state={"n": 2}))
    return older.ref, newer.ref


@pytest.mark.parametrize(
    "stored",
    ['{"context_window": [', '{"colour": "red"}', "[]", '{"context_window": [{"role": ""}]}'],
    ids=["not-json", "unknown-field", "not-an-object", "invalid-message"],
)
def test_a_corrupt_payload_names_the_checkpoint(url: str, stored: str) -> None:
    _, newer = _two_checkpoints(url)
    _corrupt(url, newer, stored)
    with Ledger(url) as ledger:
        with pytest.raises(CorruptRecordError) as raised:
            ledger.checkpoints.get(newer)
        error = raised.value
        assert (error.table, error.key, error.column) == (
            "agentledger_checkpoints",
            newer,
            "payload",
        )
        assert newer in str(error)
        assert isinstance(error, DatabaseError)
        with pytest.raises(CorruptRecordError):
            ledger.checkpoints.latest("hurt")
        assert ledger.checkpoints.list("hurt").items[0].ref == newer


async def test_a_corrupt_latest_is_reported_on_the_async_api_not_skipped(url: str) -> None:
    older, newer = _two_checkpoints(url)
    _corrupt(url, newer, "nope")
    async with AsyncLedger(url) as ledger:
        with pytest.raises(CorruptRecordError) as raised:
            await ledger.checkpoints.latest("hurt")
        assert raised.value.key == newer
        assert (await ledger.checkpoints.get(older)).payload.runtime_state == {"n": 1}
