"""A PostgreSQL hot standby (streaming replication) read through agentledger: every
read works there, sync and async, and a write is refused as a permission."""

from __future__ import annotations

import pytest

from agentledger import AsyncLedger, Ledger, NewMessage, NewStep, TokenUsage
from agentledger.errors import PermissionDeniedError

from .conftest import Standby

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def seeded(standby: Standby) -> Standby:
    with Ledger(standby.primary) as ledger:
        ledger.sessions.create("on-the-primary", user_id="ada", title="seeded")
        ledger.messages.append("on-the-primary", [NewMessage(role="user", content="hello")])
        usage = TokenUsage(input_tokens=3, output_tokens=4, total_tokens=7)
        ledger.steps.append("on-the-primary", NewStep(kind="model", model="m", usage=usage))
    standby.caught_up()
    return standby


def test_a_sync_ledger_reads_sessions_messages_and_usage_on_the_standby(seeded: Standby) -> None:
    with Ledger(seeded.standby) as ledger:
        assert ledger.sessions.get("on-the-primary").title == "seeded"
        assert [m.content for m in ledger.messages.all("on-the-primary")] == ["hello"]
        assert ledger.steps.usage(session_id="on-the-primary").total_tokens == 7
        assert [s.id for s in ledger.sessions.list(user_id="ada").items] == ["on-the-primary"]
        with ledger.unit_of_work(readonly=True) as uow:
            assert uow.sessions.get("on-the-primary").message_count == 1


async def test_an_async_ledger_reads_on_the_standby(seeded: Standby) -> None:
    async with AsyncLedger(seeded.standby) as ledger:
        assert (await ledger.sessions.get("on-the-primary")).title == "seeded"
        assert [m.content for m in await ledger.messages.all("on-the-primary")] == ["hello"]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_write_on_the_standby_is_refused_as_a_permission(
    seeded: Standby, mode: str
) -> None:
    if mode == "sync":
        with Ledger(seeded.standby) as ledger, pytest.raises(PermissionDeniedError):
            ledger.sessions.create("on-the-standby")
    else:
        async with AsyncLedger(seeded.standby) as ledger:
            with pytest.raises(PermissionDeniedError):
                await ledger.sessions.create("on-the-standby")
