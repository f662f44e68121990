"""``agentledger ui``: a read-only session viewer in the browser (the ``ui`` extra).

- ``app``: the ASGI application (Starlette routes, the token, the security headers);
- ``views``: what each page shows, as plain data (also the JSON answers);
- ``security``: loopback addresses, the access token, CSRF tokens;
- ``templates/`` and ``static/``: the server-rendered HTML and SVG, and the viewer's own
  small stylesheet and script (nothing from a CDN).
"""

from __future__ import annotations

from .app import create_app, masked
from .security import LOOPBACK_NAMES, TOKEN_ENV, is_loopback


def serve(
    url: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    schema: str | None = None,
    token: str | None = None,
    allow_delete: bool = False,
    readers: list[str] | None = None,
) -> None:
    """Serve the viewer with uvicorn until interrupted. uvicorn's access log is off: a
    first request's ``?token=`` must not reach a log. Without a token, only requests
    naming a loopback host (or ``host``) are served. ``readers``: read replicas the
    viewer's pages read from."""
    import uvicorn

    hosts = None if token is not None else {*LOOPBACK_NAMES, host, f"[{host}]"}
    app = create_app(
        url,
        schema=schema,
        token=token,
        allow_delete=allow_delete,
        allowed_hosts=hosts,
        readers=readers,
    )
    uvicorn.run(app, host=host, port=port, access_log=False, log_level="warning")


__all__ = ["TOKEN_ENV", "create_app", "is_loopback", "masked", "serve"]
