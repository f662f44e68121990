"""How a LedgerSessionService is made and closed, and how ADK's command line finds it."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.adk.cli.utils.service_factory import create_session_service_from_options

from agentledger import AsyncLedger, UsageError, ValidationError, migrations
from agentledger.integrations.adk import LedgerSessionService, from_uri, register


async def test_a_borrowed_ledger_stays_open_after_the_service_closes() -> None:
    async with AsyncLedger.in_memory() as ledger:
        async with LedgerSessionService(ledger) as service:
            await service.create_session(app_name="a", user_id="u", session_id="s")
        assert await ledger.sessions.get_by_key("s", app_name="a", user_id="u")


async def test_a_service_made_from_a_url_closes_the_ledger_it_made(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    migrations.upgrade(url)
    async with LedgerSessionService(url) as service:
        await service.create_session(app_name="a", user_id="u", session_id="s")
    with pytest.raises(UsageError, match="closed"):
        await service.get_user_state(app_name="a", user_id="u")


def test_the_service_refuses_what_is_neither_a_ledger_nor_a_url() -> None:
    with pytest.raises(ValidationError, match="AsyncLedger or a database URL"):
        LedgerSessionService(42)  # type: ignore[arg-type]


async def test_registered_adk_options_pick_the_service_for_an_agentledger_uri(
    tmp_path: Path,
) -> None:
    migrations.upgrade(f"sqlite:///{tmp_path / 'agents.db'}")
    register()
    service = create_session_service_from_options(
        base_dir=tmp_path, session_service_uri=f"agentledger+sqlite:///{tmp_path / 'agents.db'}"
    )
    assert isinstance(service, LedgerSessionService)
    try:
        created = await service.create_session(app_name="a", user_id="u")
        assert await service.get_session(app_name="a", user_id="u", session_id=created.id)
    finally:
        await service.close()


def test_a_uri_of_another_scheme_is_refused_naming_the_prefix() -> None:
    with pytest.raises(ValidationError, match="agentledger\\+"):
        from_uri("postgresql://host/db")
