"""The viewer's ASGI application (Starlette, Jinja2): routes, content negotiation, the
access token, the security headers and the one write, deleting a session.

Starlette and Jinja2 come with the ``ui`` extra, so they are imported inside
``create_app``: the rest of agentledger (and ``agentledger --help``) runs without them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextlib import asynccontextmanager
from datetime import datetime
from importlib.resources import files
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from sqlalchemy.engine import make_url

from ..clock import system_clock
from ..errors import AgentLedgerError, InvalidIdError, NotFoundError, ValidationError
from ..ledger import AsyncLedger
from .security import HEADERS, TOKEN_COOKIE, Guard
from .views import (
    PAGE_SIZES,
    USAGE_PERIODS,
    BadRequest,
    MemoryFilters,
    SessionFilters,
    UsagePeriod,
    as_json,
    memories_page,
    session_page,
    sessions_page,
    usage_page,
    visible,
)

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

JSON_SUFFIX = ".json"
STATUSES = ("active", "completed", "failed", "cancelled", "interrupted")


def masked(url: str) -> str:
    """The database URL as a page may show it: the password replaced by ``***``."""
    return make_url(url).render_as_string(hide_password=True)


def wants_json(request: Request) -> bool:
    """Whether the answer is JSON: a ``.json`` suffix, or an Accept header asking for
    JSON and not for HTML."""
    accept = request.headers.get("accept", "")
    return request.url.path.endswith(JSON_SUFFIX) or (
        "application/json" in accept and "text/html" not in accept
    )


def create_app(
    url: str,
    *,
    schema: str | None = None,
    token: str | None = None,
    allow_delete: bool = False,
    allowed_hosts: Collection[str] | None = None,
    clock: Callable[[], datetime] = system_clock,
    readers: list[str] | None = None,
) -> Starlette:
    """The viewer on the database at ``url`` (its pages read from ``readers``, read
    replicas, when given): read-only unless ``allow_delete``; every
    request needs ``token`` when one is given. With ``allowed_hosts``, a request whose
    Host header names another host is refused (a web page rebinding its own name to
    127.0.0.1 cannot read a viewer that has no token). The ledger opens with the
    application's lifespan (on the server's event loop) and closes with it."""
    from jinja2 import Environment, PackageLoader
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
    from starlette.routing import Route

    guard = Guard(token=token)
    # Every value a template prints is HTML-escaped (autoescape) after its control
    # characters are made visible (finalize): content is hostile input.
    env = Environment(
        loader=PackageLoader("agentledger.ui", "templates"),
        autoescape=True,
        finalize=_finalize,
    )
    env.filters.update(when=_when, num=lambda value: f"{value:,}", pretty=_pretty)
    env.globals.update(qs=urlencode, dict=dict, statuses=STATUSES, page_sizes=PAGE_SIZES)
    database = masked(url)
    static = {
        name: (files("agentledger.ui").joinpath("static", name).read_bytes(), kind)
        for name, kind in (("app.css", "text/css"), ("app.js", "text/javascript"))
    }
    state: dict[str, AsyncLedger] = {}

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state["ledger"] = AsyncLedger(url, schema=schema, readers=readers)
        try:
            yield
        finally:
            await state.pop("ledger").close()

    def render(
        request: Request, template: str, data: dict[str, Any], status: int = 200
    ) -> Response:
        if wants_json(request):
            return JSONResponse(data, status_code=status)
        page = env.get_template(template).render(
            data=data, database=database, allow_delete=allow_delete, path=request.url.path
        )
        return HTMLResponse(page, status_code=status)

    def failure(request: Request, status: int, message: str) -> Response:
        return render(request, "error.html", {"error": message, "status": status}, status)

    Handler = Callable[["Request"], Awaitable["Response"]]

    def guarded(handler: Handler) -> Handler:
        """The token check, the error pages and the security headers around a route."""

        async def run(request: Request) -> Response:
            offered = request.query_params.get("token")
            if allowed_hosts is not None and _host(request) not in allowed_hosts:
                response: Response = failure(request, 421, "this viewer does not serve that host")
            elif guard.token is not None and offered is not None and guard.admits(offered):
                response = _without_token(request)
                response.set_cookie(
                    TOKEN_COOKIE, offered, httponly=True, samesite="strict", path="/"
                )
            elif not guard.admits(_offered_token(request)):
                response = failure(request, 401, "this viewer needs its access token")
            else:
                response = await _answer(request, handler)
            response.headers.update(HEADERS)
            return response

        return run

    async def _answer(request: Request, handler: Handler) -> Response:
        try:
            return await handler(request)
        except NotFoundError as exc:
            return failure(request, 404, str(exc))
        except (BadRequest, ValidationError, InvalidIdError) as exc:
            return failure(request, 400, str(exc))
        except AgentLedgerError as exc:
            return failure(request, 500, f"{type(exc).__name__}: {str(exc).splitlines()[0]}")

    def _without_token(request: Request) -> Response:
        query = {k: v for k, v in request.query_params.items() if k != "token"}
        target = request.url.path + (f"?{urlencode(query)}" if query else "")
        return RedirectResponse(target, status_code=303)

    async def home(request: Request) -> Response:
        return RedirectResponse("/sessions", status_code=303)

    async def sessions(request: Request) -> Response:
        filters = SessionFilters.parse(dict(request.query_params))
        data = await sessions_page(state["ledger"], filters)
        data["deleted"] = request.query_params.get("deleted")
        return render(request, "sessions.html", data)

    async def session(request: Request) -> Response:
        id = _session_id(request)
        after = request.query_params.get("after")
        try:
            start = None if after in (None, "") else int(after)
        except ValueError:
            raise BadRequest("after: a message seq") from None
        data = await session_page(state["ledger"], id, after=start)
        if allow_delete:
            data["csrf"] = guard.csrf_token(id)
        return render(request, "session.html", data)

    async def delete(request: Request) -> Response:
        if not allow_delete:
            return failure(request, 403, "deleting is off: start the viewer with --allow-delete")
        id = _session_id(request)
        if request.method == "GET":
            record = await state["ledger"].sessions.get(id)
            data = {"session": record.model_dump(mode="json"), "csrf": guard.csrf_token(id)}
            return render(request, "confirm.html", data)
        form = await request.form()
        offered = form.get("csrf")
        if not guard.csrf_valid(id, offered if isinstance(offered, str) else None):
            return failure(request, 403, "the form's CSRF token is missing or wrong: reload it")
        await state["ledger"].sessions.delete(id)
        if wants_json(request):
            return JSONResponse({"deleted": id})
        return RedirectResponse(f"/sessions?{urlencode({'deleted': id})}", status_code=303)

    async def memories(request: Request) -> Response:
        filters = MemoryFilters.parse(dict(request.query_params))
        return render(request, "memories.html", await memories_page(state["ledger"], filters))

    async def usage(request: Request) -> Response:
        period = UsagePeriod.parse(dict(request.query_params), clock())
        data = await usage_page(state["ledger"], period)
        data["periods"] = USAGE_PERIODS
        return render(request, "usage.html", data)

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in static:
            return failure(request, 404, f"no file {name!r}")
        body, kind = static[name]
        return Response(body, media_type=kind)

    routes = [
        Route("/", guarded(home)),
        Route("/sessions", guarded(sessions)),
        Route("/sessions.json", guarded(sessions)),
        Route("/sessions/{id}/delete", guarded(delete), methods=["GET", "POST"]),
        Route("/sessions/{id}", guarded(session)),
        Route("/memories", guarded(memories)),
        Route("/memories.json", guarded(memories)),
        Route("/usage", guarded(usage)),
        Route("/usage.json", guarded(usage)),
        Route("/static/{name:str}", guarded(asset)),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.guard = guard
    return app


def _session_id(request: Request) -> str:
    id: str = request.path_params["id"]
    return id.removesuffix(JSON_SUFFIX) if request.url.path.endswith(JSON_SUFFIX) else id


def _host(request: Request) -> str:
    """The host the request's Host header names, without its port."""
    host = request.headers.get("host", "")
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rpartition(":")[0] if ":" in host else host


def _offered_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    return request.cookies.get(TOKEN_COOKIE)


def _when(value: str | None) -> str:
    """An ISO time as ``YYYY-MM-DD HH:MM:SS`` (UTC), ``-`` for none."""
    if not value:
        return "-"
    return datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M:%S")


def _pretty(value: Any) -> str:
    """A JSON value as indented text with control characters visible."""
    return visible(as_json(value))


def _finalize(value: Any) -> Any:
    """What a template prints: text with its control characters visible; markup the
    templates made themselves (a macro's output, ``__html__``) as it is."""
    if isinstance(value, str) and not hasattr(value, "__html__"):
        return visible(value)
    return value
