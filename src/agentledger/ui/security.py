"""What keeps the viewer safe, free of any web framework: which addresses are loopback,
the access token's checks and the CSRF tokens of the one write (deleting a session)."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from dataclasses import dataclass, field

TOKEN_ENV = "AGENTLEDGER_UI_TOKEN"
"""The environment variable ``agentledger ui`` reads the access token from."""
TOKEN_COOKIE = "agentledger_ui_token"
"""The cookie a browser keeps the token in after opening the viewer with ``?token=``."""
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
"""No inline script or style, nothing from another origin: content cannot run code."""
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
"""The Host header values of a viewer reached on this machine."""
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
"""The headers every answer carries."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) only listens on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Guard:
    """The access token (None: none asked for) and this process's secret for CSRF
    tokens (a new one per start, so a form from an earlier run is refused)."""

    token: str | None = None
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)

    def admits(self, offered: str | None) -> bool:
        """Whether ``offered`` is the access token (anything is, when there is none)."""
        if self.token is None:
            return True
        return offered is not None and hmac.compare_digest(
            offered.encode("utf-8", "surrogatepass"), self.token.encode()
        )

    def csrf_token(self, session_id: str) -> str:
        """The token a form to delete ``session_id`` carries."""
        return hmac.new(self.secret, f"delete:{session_id}".encode(), hashlib.sha256).hexdigest()

    def csrf_valid(self, session_id: str, offered: str | None) -> bool:
        """Whether ``offered`` is the CSRF token of deleting ``session_id``."""
        return offered is not None and hmac.compare_digest(
            offered.encode("utf-8", "surrogatepass"), self.csrf_token(session_id).encode()
        )
