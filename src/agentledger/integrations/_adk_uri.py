"""The service URIs ADK's registry hands agentledger's session and memory services."""

from __future__ import annotations

from typing import Final

from .. import ValidationError

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
