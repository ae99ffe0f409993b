"""The console's web application (Starlette): pages rendered on the server with Jinja2, a little htmx.

Security: every page escapes what it shows (Jinja2 autoescape: partner names are data, never markup); every
change is a POST carrying the CSRF token of its form (double-submit: a random cookie and the same value in the
form, compared in constant time), and cross-site requests are refused by their Origin; with a token configured,
nothing but the login page and the static files is served without it (cookie, or `Authorization: Bearer`).
"""

from __future__ import annotations

import contextlib
import hmac
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, date, datetime, timedelta
from importlib.resources import files
from typing import Any
from urllib.parse import urlencode, urlsplit

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from edinbox import edi
from edinbox._errors import ConfigurationError, InboxError, TransientError
from edinbox._urls import mask
from edinbox.console import _data
from edinbox.console._chart import COLORS, stacked
from edinbox.hub import _ops
from edinbox.hub._config import HubConfig
from edinbox.hub._parts import open_inbox, verify_found

__all__ = ["create_app"]

CSRF_COOKIE = "edinbox_csrf"
TOKEN_COOKIE = "edinbox_token"  # noqa: S105 - the cookie's name, not a secret
OPERATOR_COOKIE = "edinbox_operator"
PARKED = {"dead": "Dead", "conflict": "Conflicting", "rejected": "Rejected"}
RETRY_AFTER = 5
"""Seconds a 503 page asks the browser to wait: about the longest pause between the pool's reconnect attempts."""

_HERE = files("edinbox.console")


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(_HERE.joinpath("templates"))),
        autoescape=select_autoescape(["html", "svg"], default=True),
    )
    env.filters["when"] = lambda value: value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else ""
    env.globals["partner_of"] = edi.partner
    return env


def create_app(config: HubConfig, *, token: str | None = None) -> Starlette:
    """The console over the journal `config` names; with `token`, every page asks for it first."""
    env = _environment()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        from edinbox.console import LOGGER
        from edinbox.hub._config import give_up_after
        from edinbox.hub._outage import Outage

        async with open_inbox(config) as inbox:
            await Outage(LOGGER, give_up_after=give_up_after(config)).call(lambda: verify_found(inbox))
            app.state.inbox = inbox
            yield

    def page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        html = env.get_template(template).render(
            request=request, csrf=request.state.csrf, consumer=config.consumer, parked=PARKED, **context
        )
        return HTMLResponse(html, status_code=status_code)

    async def home(request: Request) -> Response:
        query = _query(request)
        rows, more = await _data.search(request.app.state.inbox, query)
        context: dict[str, Any] = {
            "query": query,
            "rows": rows,
            "more": more,
            "statuses": _data.STATUSES,
            "args": request.query_params,
        }
        if request.headers.get("HX-Request") == "true":
            return page(request, "_results.html", **context)
        return page(request, "search.html", **context)

    async def message(request: Request) -> Response:
        key = request.query_params.get("key", "")
        try:
            data = await _ops.show(config, key)
        except TransientError:
            raise  # the 503 page: the key may well exist
        except InboxError as exc:
            return page(request, "error.html", 400, message=str(exc))
        if data is None:
            return page(request, "error.html", 404, message=f"no journal row {key!r} for consumer {config.consumer!r}")
        done = request.query_params.get("done", "")
        if data["status"] == "rejected":
            return page(request, "rejected.html", key=key, row=data, done=done, actions=_data.REJECTED_ACTIONS)
        record = await request.app.state.inbox.get(*_ops.split_key(key))  # the payloads as bytes
        return page(
            request,
            "message.html",
            key=key,
            row=data,
            partner=edi.partner(data.get("source", "")),
            segments=_data.segments(record.payload if record else None),
            conflict_segments=_data.segments(record.conflict_payload if record else None),
            done=done,
            actions=_data.ACTIONS,
        )

    async def parked(request: Request) -> Response:
        kind = request.path_params["kind"]
        if kind not in PARKED:
            return page(request, "error.html", 404, message="no such list")
        rows = await _ops.list_rows(config, status=kind, limit=200)
        return page(
            request, "parked.html", kind=kind, rows=rows, actions=_data.ACTIONS, rejected_actions=_data.REJECTED_ACTIONS
        )

    async def confirm(request: Request) -> Response:
        action, key = request.query_params.get("action", ""), request.query_params.get("key", "")
        if action not in _data.ACTIONS:
            return page(request, "error.html", 400, message=f"no action {action!r}")
        operator = request.cookies.get(OPERATOR_COOKIE, "")
        return page(request, "confirm.html", action=action, key=key, operator=operator)

    async def act(request: Request) -> Response:
        form = request.state.form
        action, key = str(form.get("action", "")), str(form.get("key", ""))
        who = str(form.get("operator", "")).strip()[:100]
        if action not in _data.ACTIONS or not key or not who:
            return page(request, "error.html", 400, message="an action needs its name, a key and who asks")
        try:
            changed = await _data.act(config, request.app.state.inbox, action=action, key=key, who=who)
        except ConfigurationError as exc:
            return page(request, "error.html", 409, message=f"{action} refused: {exc}")
        done = f"{action}: done" if changed else f"{action}: no row changed"
        response = RedirectResponse(f"/message?{urlencode({'key': key, 'done': done})}", status_code=303)
        response.set_cookie(OPERATOR_COOKIE, who, httponly=True, samesite="strict")
        return response

    async def dashboard(request: Request) -> Response:
        data = await _data.dashboard(config, request.app.state.inbox)
        chart = stacked(data["per_minute"], start=data["since"], end=data["now"])
        return page(request, "dashboard.html", data=data, chart=chart, colors=COLORS)

    async def audit(request: Request) -> Response:
        return page(request, "audit.html", rows=await _data.audit_rows(request.app.state.inbox))

    async def login(request: Request) -> Response:
        if request.method == "GET":
            return page(request, "login.html")
        form = request.state.form
        given = str(form.get("token", ""))
        if token is None or not hmac.compare_digest(given.encode(), token.encode()):
            return page(request, "login.html", 401, wrong=True)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(TOKEN_COOKIE, given, httponly=True, samesite="strict")
        return response

    routes = [
        Route("/", home),
        Route("/message", message),
        Route("/parked/{kind}", parked),
        Route("/confirm", confirm),
        Route("/action", act, methods=["POST"]),
        Route("/dashboard", dashboard),
        Route("/audit", audit),
        Route("/login", login, methods=["GET", "POST"]),
        Mount("/static", StaticFiles(directory=str(_HERE.joinpath("static"))), name="static"),
    ]

    async def unavailable(request: Request, exc: Exception) -> Response:
        """A page asked of a database (or broker) that is down: 503 with the error's first line, nothing changed;
        the journal's pool reconnects by itself, so the same request succeeds once the dependency is back."""
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        message = f"unavailable, try again shortly: {mask(first)}"
        response = page(request, "error.html", 503, title="Unavailable", message=message)
        response.headers["Retry-After"] = str(RETRY_AFTER)
        return response

    guard = Middleware(BaseHTTPMiddleware, dispatch=_guard(token))
    return Starlette(
        routes=routes, middleware=[guard], lifespan=lifespan, exception_handlers={TransientError: unavailable}
    )


Dispatch = Callable[[Request], Awaitable[Response]]


def _guard(token: str | None) -> Callable[[Request, Dispatch], Awaitable[Response]]:
    """The middleware: the token (when configured), the CSRF check of every POST, and the CSRF cookie."""

    async def dispatch(request: Request, call_next: Dispatch) -> Response:
        public = request.url.path.startswith("/static/") or request.url.path == "/login"
        if token is not None and not public and not _authorised(request, token):
            if request.method == "GET":
                return RedirectResponse("/login", status_code=303)
            return PlainTextResponse("a token is needed", status_code=401)
        cookie = request.cookies.get(CSRF_COOKIE, "")
        if request.method == "POST":
            refusal = await _csrf_refusal(request, cookie)
            if refusal:
                return PlainTextResponse(refusal, status_code=403)
        request.state.csrf = cookie or secrets.token_urlsafe(32)
        response = await call_next(request)
        if not cookie:
            response.set_cookie(CSRF_COOKIE, request.state.csrf, httponly=True, samesite="strict")
        response.headers["Content-Security-Policy"] = "default-src 'self'; style-src 'self'; img-src 'self' data:"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "same-origin"
        return response

    return dispatch


def _authorised(request: Request, token: str) -> bool:
    given = request.cookies.get(TOKEN_COOKIE, "")
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        given = header.removeprefix("Bearer ")
    return bool(given) and hmac.compare_digest(given.encode(), token.encode())


async def _csrf_refusal(request: Request, cookie: str) -> str:
    """Why a POST is refused (empty when it is not): another site's Origin, or a missing or wrong CSRF token."""
    origin = request.headers.get("Origin")
    if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("Host", ""):
        return "refused: this request comes from another site"
    form = await request.form()
    request.state.form = form  # the endpoint reads the form from here: the body is read once
    given = str(form.get("csrf", ""))
    if not cookie or not given or not hmac.compare_digest(given.encode(), cookie.encode()):
        return "refused: the CSRF token is missing or wrong (reload the page and try again)"
    return ""


def _query(request: Request) -> _data.Query:
    """The search form's fields; a date that does not parse is ignored (the form shows it empty)."""
    args = request.query_params
    status = args.get("status", "")
    try:
        page = max(1, int(args.get("page", "1")))
    except ValueError:
        page = 1
    until = _day(args.get("until", ""))
    return _data.Query(
        partner=args.get("partner", "")[:200],
        control=args.get("control", "")[:200],
        invoice=args.get("invoice", "")[:200],
        status=status if status in _data.STATUSES else "",
        since=_day(args.get("since", "")),
        until=until + timedelta(days=1) if until else None,  # the until day is included
        page=page,
    )


def _day(text: str) -> datetime | None:
    try:
        day = date.fromisoformat(text)
    except ValueError:
        return None
    return datetime(day.year, day.month, day.day, tzinfo=UTC)
