"""Contract: grants, the capabilities a user approved."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentledger import NotFoundError, ValidationError

from .harness import Harness, tier

LONG_CAPABILITY = "shell:" + "x" * 4090


class GrantContract:
    """Approvals: grant, check, list, revoke, expire."""

    async def test_a_granted_capability_is_granted(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("g")
        grant = await harness.ledger.grants.grant("g", "tool:search", granted_by="ada")
        assert (grant.session_id, grant.capability, grant.granted_by) == ("g", "tool:search", "ada")
        assert await harness.ledger.grants.is_granted("g", "tool:search") is True
        assert await harness.ledger.grants.is_granted("g", "tool:delete") is False

    async def test_capabilities_compare_exactly(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("g")
        await harness.ledger.grants.grant("g", "Shell:rm")
        for other in ("shell:rm", "Shell:rm ", "Shell:r", "Shell:rm\n"):
            assert await harness.ledger.grants.is_granted("g", other) is False

    async def test_a_4096_character_capability_is_stored_and_matched(
        self, harness: Harness
    ) -> None:
        await harness.ledger.sessions.create("g")
        assert len(LONG_CAPABILITY) == 4096
        await harness.ledger.grants.grant("g", LONG_CAPABILITY)
        assert await harness.ledger.grants.is_granted("g", LONG_CAPABILITY)
        assert not await harness.ledger.grants.is_granted("g", LONG_CAPABILITY[:-1] + "y")
        with pytest.raises(ValidationError):
            await harness.ledger.grants.grant("g", LONG_CAPABILITY + "x")

    @pytest.mark.parametrize(
        "bad", ["", "nul\x00", "lone \ud800"], ids=["empty", "nul", "surrogate"]
    )
    @tier("logic")
    async def test_an_unstorable_capability_is_refused(self, harness: Harness, bad: str) -> None:
        await harness.ledger.sessions.create("g")
        with pytest.raises(ValidationError):
            await harness.ledger.grants.grant("g", bad)

    async def test_granting_again_refreshes_who_and_when_it_expires(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("g")
        soon = datetime.now(UTC) + timedelta(hours=1)
        await harness.ledger.grants.grant("g", "tool:x", granted_by="ada", expires_at=soon)
        again = await harness.ledger.grants.grant("g", "tool:x", granted_by="bob")
        (only,) = await harness.ledger.grants.active("g")
        assert only == again
        assert (only.granted_by, only.expires_at) == ("bob", None)

    async def test_an_expired_grant_is_not_granted(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("g")
        past = datetime.now(UTC) - timedelta(seconds=1)
        await harness.ledger.grants.grant("g", "tool:old", expires_at=past)
        await harness.ledger.grants.grant("g", "tool:new")
        assert await harness.ledger.grants.is_granted("g", "tool:old") is False
        assert [g.capability for g in await harness.ledger.grants.active("g")] == ["tool:new"]

    @tier("logic")
    async def test_a_naive_expiry_is_refused(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("g")
        with pytest.raises(ValidationError):
            await harness.ledger.grants.grant("g", "tool:x", expires_at=datetime(2030, 1, 1))

    async def test_revoke_one_or_all_says_how_many(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("g")
        for capability in ("a", "b", "c"):
            await harness.ledger.grants.grant("g", capability)
        assert await harness.ledger.grants.revoke("g", "b") == 1
        assert await harness.ledger.grants.revoke("g", "b") == 0
        assert await harness.ledger.grants.revoke("g") == 2
        assert await harness.ledger.grants.active("g") == []

    async def test_grants_belong_to_their_session(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("mine")
        await harness.ledger.sessions.create("theirs")
        await harness.ledger.grants.grant("mine", "tool:x")
        assert await harness.ledger.grants.is_granted("theirs", "tool:x") is False
        await harness.ledger.sessions.delete("mine")
        await harness.ledger.sessions.create("mine")
        assert await harness.ledger.grants.is_granted("mine", "tool:x") is False

    async def test_granting_on_an_unknown_or_deleted_session_is_not_found(
        self, harness: Harness
    ) -> None:
        with pytest.raises(NotFoundError):
            await harness.ledger.grants.grant("nobody", "tool:x")
        await harness.ledger.sessions.create("gone")
        await harness.ledger.sessions.delete("gone")
        with pytest.raises(NotFoundError):
            await harness.ledger.grants.grant("gone", "tool:x")
        assert not await harness.ledger.sessions.exists("gone")
        with pytest.raises(NotFoundError):
            await harness.ledger.grants.active("gone")

    async def test_a_resumed_ledger_sees_the_grants(self, harness: Harness) -> None:
        await harness.ledger.sessions.create("g")
        await harness.ledger.grants.grant("g", "tool:x")
        async with harness.require("reopen")() as other:
            assert await other.grants.is_granted("g", "tool:x") is True


__all__ = ["GrantContract"]
