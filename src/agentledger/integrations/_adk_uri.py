"""What agentledger's ADK session and memory services share: the service URIs ADK's
registry hands them, and the ledger each is given or makes."""

from __future__ import annotations

from typing import Final

from sqlalchemy.engine import URL

from .. import AsyncLedger, ValidationError

SCHEME_PREFIX: Final = "agentledger+"
"""What a service URI starts with for ADK to pick agentledger's service:
``agentledger+sqlite:///agents.db``, ``agentledger+postgresql://...``; the rest is the
database URL. ``agentledger://`` alone means ``AGENTLEDGER_DATABASE_URL`` (else
``sqlite:///agentledger.db``)."""
SCHEMES: Final = (
    "agentledger",
    "agentledger+sqlite",
    "agentledger+postgresql",
    "agentledger+mysql",
)
"""The URI schemes ``register`` adds to ADK's service registry."""


def database_url(uri: str, service: str) -> str | None:
    """The database URL in a ``service`` URI (``session``, ``memory``); None for a bare
    ``agentledger:`` (the default database). ValidationError for another scheme."""
    if uri.startswith(SCHEME_PREFIX):
        return uri.removeprefix(SCHEME_PREFIX)
    if uri.split(":", 1)[0] == "agentledger":
        return None
    raise ValidationError(
        f"a {service} service URI for agentledger starts with {SCHEME_PREFIX!r}, got "
        f"{uri.split(':', 1)[0]!r}",
        path="uri",
    )


def ledger_of(ledger: object, service: str) -> tuple[AsyncLedger, bool]:
    """The ledger a ``service`` runs on, and whether it made it (and closes it): a
    given ``AsyncLedger``'s face on its primary (ADK reads what it just wrote), or one
    made for a database URL (None: ``AGENTLEDGER_DATABASE_URL``, else
    ``sqlite:///agentledger.db``)."""
    if isinstance(ledger, AsyncLedger):
        return ledger.primary, False
    if ledger is None or isinstance(ledger, str | URL):
        return AsyncLedger(ledger), True
    raise ValidationError(
        f"{service} takes an AsyncLedger or a database URL, got {type(ledger).__name__}",
        path="ledger",
    )
