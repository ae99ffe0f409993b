"""The console's web application (Starlette): pages rendered on the server with Jinja2, a little htmx.

Every page escapes what it shows (Jinja2 autoescape: partner names are data, never markup). What every request
passes first (allowed hosts, the token, the session, CSRF on every POST, the response headers) is
`edinbox.console._guard`; the signed sessions and the login limit are `edinbox.console._session`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from importlib.resources import files
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from edinbox import edi
from edinbox._errors import ConfigurationError, InboxError, SourceError, StoreError, TransientError
from edinbox._payloads import MAX_QUERY
from edinbox.console import _data
from edinbox.console._chart import COLORS, stacked
from edinbox.console._guard import Access, guard
from edinbox.console._story import story
from edinbox.hub import partners as _ledger
from edinbox.hub.config import HubConfig, duration_text
from edinbox.hub.database import open_inbox, verify_found
from edinbox.hub.ops import find, list_rows

__all__ = ["create_app"]

OPERATOR_COOKIE = "edinbox_operator"
PARKED = {"dead": "Dead", "conflict": "Conflicting", "rejected": "Rejected"}
RETRY_AFTER = 5
"""Seconds a 503 page asks the browser to wait: about the longest pause between the pool's reconnect attempts."""
MAX_PAGE = 100_000
"""The last page of search results one can ask for (50 rows each)."""
FIRST_YEAR, LAST_YEAR = 1900, 9998
"""The years a search's dates may name: every database compares them, and the day after `until` still exists."""

_HERE = files("edinbox.console")


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(_HERE.joinpath("templates"))),
        autoescape=select_autoescape(["html", "svg"], default=True),
    )
    env.filters["when"] = lambda value: value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else ""
    env.globals["partner_of"] = edi.partner
    return env


class BadQuery(InboxError, ValueError):
    """A query parameter the console cannot use (permanent for that request): a 400 page saying which and why."""


def create_app(config: HubConfig, *, access: Access | None = None) -> Starlette:
    """The console over the journal `config` names, guarded by `access` (default: loopback names, no token)."""
    env = _environment()
    access = access or Access()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        from edinbox.console import LOGGER
        from edinbox.loop import Outage

        async with open_inbox(config) as inbox:
            await Outage(LOGGER, give_up_after=config.give_up_after).call(lambda: verify_found(inbox))
            app.state.inbox = inbox
            yield

    def page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        html = env.get_template(template).render(
            request=request,
            csrf=request.state.csrf,
            signed_in=request.state.session.authenticated,
            consumer=config.consumer,
            parked=PARKED,
            **context,
        )
        return HTMLResponse(html, status_code=status_code)

    def refuse(request: Request, status_code: int, message: str) -> Response:
        titles = {400: "Bad request", 401: "Log in", 403: "Refused", 413: "Too large", 429: "Too many tries"}
        return page(request, "error.html", status_code, title=titles.get(status_code, "Error"), message=message)

    async def home(request: Request) -> Response:
        try:
            query = _query(request)
        except BadQuery as exc:
            return refuse(request, 400, str(exc))
        try:
            rows, more = await _data.search(request.app.state.inbox, query)
        except ConfigurationError as exc:  # a text with nothing to search for
            return refuse(request, 400, str(exc))
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
        inbox = request.app.state.inbox
        try:
            found = await find(inbox, key)  # the row and its kept payload, read once
        except TransientError:
            raise  # the 503 page: the key may well exist
        except InboxError as exc:
            return page(request, "error.html", 400, message=str(exc))
        if found is None:
            return page(request, "error.html", 404, message=f"no journal row {key!r} for consumer {config.consumer!r}")
        data, record, kept = found.data, found.record, found.kept
        done = request.query_params.get("done", "")
        if data["status"] == "rejected":
            return page(request, "rejected.html", key=key, row=data, done=done, actions=_data.REJECTED_ACTIONS)
        payload = kept.payload if kept is not None else record.payload if record else None
        return page(
            request,
            "message.html",
            key=key,
            row=data,
            partner=edi.partner(data.get("source", "")),
            trace=_data.trace_ids(data.get("trace")),
            story=await story(inbox, key, data),
            segments=_data.segments(payload),
            kept=kept,
            conflict_segments=_data.segments(record.conflict_payload if record else None),
            done=done,
            actions=_data.ACTIONS,
        )

    async def parked(request: Request) -> Response:
        kind = request.path_params["kind"]
        if kind not in PARKED:
            return page(request, "error.html", 404, message="no such list")
        rows = await list_rows(request.app.state.inbox, status=kind, limit=200)
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
        access.set_cookie(response, OPERATOR_COOKIE, who)
        return response

    async def dashboard(request: Request) -> Response:
        data = await _data.dashboard(config, request.app.state.inbox)
        chart = stacked(data["per_minute"], start=data["since"], end=data["now"])
        return page(request, "dashboard.html", data=data, chart=chart, colors=COLORS)

    async def partners(request: Request) -> Response:
        partner = request.query_params.get("partner", "")[:200] or None
        if partner is not None and "\x00" in partner:
            return refuse(request, 400, "partner: a NUL is not allowed")
        ledgers = await _data.partners(config, request.app.state.inbox, partner=partner)
        findings = _ledger.findings(ledgers)
        window = duration_text(config.duplicate_window)
        return page(request, "partners.html", partner=partner, ledgers=ledgers, findings=findings, window=window)

    async def audit(request: Request) -> Response:
        return page(request, "audit.html", rows=await _data.audit_rows(request.app.state.inbox))

    async def login(request: Request) -> Response:
        if request.method == "GET":
            return page(request, "login.html")
        status, wait = access.login(request, str(request.state.form.get("token", "")))
        if status == 303:
            return RedirectResponse("/", status_code=303)
        response = page(request, "login.html", status, wrong=status == 401, wait=wait)
        if wait:
            response.headers["Retry-After"] = str(wait)
        return response

    async def logout(request: Request) -> Response:
        access.logout(request)
        return RedirectResponse("/login" if access.token else "/", status_code=303)

    routes = [
        Route("/", home),
        Route("/message", message),
        Route("/parked/{kind}", parked),
        Route("/confirm", confirm),
        Route("/action", act, methods=["POST"]),
        Route("/dashboard", dashboard),
        Route("/partners", partners),
        Route("/audit", audit),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(_HERE.joinpath("static"))), name="static"),
    ]

    async def unavailable(request: Request, exc: Exception) -> Response:
        """A page asked of a database (or broker) that is down: 503 naming what is down and nothing of it (no user,
        no host), nothing changed; the journal's pool reconnects by itself, so the same request succeeds once the
        dependency is back."""
        what = "the database" if isinstance(exc, StoreError) else "the broker" if isinstance(exc, SourceError) else None
        down = f"{what} is unreachable" if what else "a dependency is unreachable"
        response = page(
            request, "error.html", 503, title="Unavailable", message=f"unavailable, try again shortly: {down}"
        )
        response.headers["Retry-After"] = str(RETRY_AFTER)
        return response

    return Starlette(
        routes=routes,
        middleware=[Middleware(BaseHTTPMiddleware, dispatch=guard(access, refuse))],
        lifespan=lifespan,
        exception_handlers={TransientError: unavailable},
    )


def _query(request: Request) -> _data.Query:
    """The search form's fields; BadQuery for a page or a date that is not one (or out of range)."""
    args = request.query_params
    status = args.get("status", "")
    text = args.get("page", "") or "1"
    if not (text.isascii() and text.isdigit() and len(text) <= len(str(MAX_PAGE)) and 1 <= int(text) <= MAX_PAGE):
        raise BadQuery(f"page {text[:20]!r} is not a page number (1 to {MAX_PAGE})")
    until = _day(args, "until")
    return _data.Query(
        partner=args.get("partner", "")[:200],
        control=args.get("control", "")[:200],
        invoice=args.get("invoice", "")[:200],
        text=args.get("text", "")[:MAX_QUERY],
        status=status if status in _data.STATUSES else "",
        since=_day(args, "since"),
        until=until + timedelta(days=1) if until else None,  # the until day is included
        page=int(text),
    )


def _day(args: Any, name: str) -> datetime | None:
    """The date field `name` (empty: None); BadQuery when it is not a date from 1900 to 9998."""
    text = args.get(name, "")
    if not text:
        return None
    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise BadQuery(f"{name} {text[:40]!r} is not a date (YYYY-MM-DD)") from None
    if not FIRST_YEAR <= day.year <= LAST_YEAR:
        raise BadQuery(f"{name} {text!r} is out of range (years {FIRST_YEAR} to {LAST_YEAR})")
    return datetime(day.year, day.month, day.day, tzinfo=UTC)
