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
from edinbox.hub import partners
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
    pages = _Pages(config, env, access)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        from edinbox.console import LOGGER
        from edinbox.loop import Outage

        async with open_inbox(config) as inbox:
            await Outage(LOGGER, give_up_after=config.give_up_after).call(lambda: verify_found(inbox))
            app.state.inbox = inbox
            yield

    routes = [
        Route("/", pages.home),
        Route("/message", pages.message),
        Route("/parked/{kind}", pages.parked),
        Route("/confirm", pages.confirm),
        Route("/action", pages.act, methods=["POST"]),
        Route("/dashboard", pages.dashboard),
        Route("/partners", pages.partners),
        Route("/audit", pages.audit),
        Route("/login", pages.login, methods=["GET", "POST"]),
        Route("/logout", pages.logout, methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(_HERE.joinpath("static"))), name="static"),
    ]

    return Starlette(
        routes=routes,
        middleware=[Middleware(BaseHTTPMiddleware, dispatch=guard(access, pages.refuse))],
        lifespan=lifespan,
        exception_handlers={TransientError: pages.unavailable},
    )


class _Pages:
    """The console's pages over the journal a configuration names, rendered from its templates, guarded by `access`."""

    def __init__(self, config: HubConfig, env: Environment, access: Access) -> None:
        """Pages of `config`'s journal, rendered with `env`."""
        self.config = config
        self.env = env
        self.access = access

    def page(self, request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        """The page `template` rendered with `context` and what every page shows (the consumer, the session)."""
        html = self.env.get_template(template).render(
            request=request,
            csrf=request.state.csrf,
            signed_in=request.state.session.authenticated,
            consumer=self.config.consumer,
            parked=PARKED,
            **context,
        )
        return HTMLResponse(html, status_code=status_code)

    def refuse(self, request: Request, status_code: int, message: str) -> Response:
        """The error page of a refused request (400, 401, 403, 413, 429) saying why."""
        titles = {400: "Bad request", 401: "Log in", 403: "Refused", 413: "Too large", 429: "Too many tries"}
        return self.page(request, "error.html", status_code, title=titles.get(status_code, "Error"), message=message)

    async def home(self, request: Request) -> Response:
        """`/`: the search form and its results (only the results to an htmx request)."""
        try:
            query = _query(request)
        except BadQuery as exc:
            return self.refuse(request, 400, str(exc))
        try:
            rows, more = await _data.search(request.app.state.inbox, query)
        except ConfigurationError as exc:  # a text with nothing to search for
            return self.refuse(request, 400, str(exc))
        context: dict[str, Any] = {
            "query": query,
            "rows": rows,
            "more": more,
            "statuses": _data.STATUSES,
            "args": request.query_params,
        }
        if request.headers.get("HX-Request") == "true":
            return self.page(request, "_results.html", **context)
        return self.page(request, "search.html", **context)

    async def message(self, request: Request) -> Response:
        """`/message?key=`: one journal row or parked payload, its story, its segments and its actions."""
        key = request.query_params.get("key", "")
        inbox = request.app.state.inbox
        try:
            found = await find(inbox, key)  # the row and its kept payload, read once
        except TransientError:
            raise  # the 503 page: the key may well exist
        except InboxError as exc:
            return self.page(request, "error.html", 400, message=str(exc))
        if found is None:
            return self.page(
                request, "error.html", 404, message=f"no journal row {key!r} for consumer {self.config.consumer!r}"
            )
        data, record, kept = found.data, found.record, found.kept
        done = request.query_params.get("done", "")
        if data["status"] == "rejected":
            return self.page(request, "rejected.html", key=key, row=data, done=done, actions=_data.REJECTED_ACTIONS)
        payload = kept.payload if kept is not None else record.payload if record else None
        return self.page(
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

    async def parked(self, request: Request) -> Response:
        """`/parked/{kind}`: the rows parked dead, conflicting or rejected."""
        kind = request.path_params["kind"]
        if kind not in PARKED:
            return self.page(request, "error.html", 404, message="no such list")
        rows = await list_rows(request.app.state.inbox, status=kind, limit=200)
        return self.page(
            request, "parked.html", kind=kind, rows=rows, actions=_data.ACTIONS, rejected_actions=_data.REJECTED_ACTIONS
        )

    async def confirm(self, request: Request) -> Response:
        """`/confirm`: the form that asks who asks for an action on a key."""
        action, key = request.query_params.get("action", ""), request.query_params.get("key", "")
        if action not in _data.ACTIONS:
            return self.page(request, "error.html", 400, message=f"no action {action!r}")
        operator = request.cookies.get(OPERATOR_COOKIE, "")
        return self.page(request, "confirm.html", action=action, key=key, operator=operator)

    async def act(self, request: Request) -> Response:
        """`POST /action`: run the confirmed action (audited), then back to the message with what was done."""
        form = request.state.form
        action, key = str(form.get("action", "")), str(form.get("key", ""))
        who = str(form.get("operator", "")).strip()[:100]
        if action not in _data.ACTIONS or not key or not who:
            return self.page(request, "error.html", 400, message="an action needs its name, a key and who asks")
        try:
            changed = await _data.act(self.config, request.app.state.inbox, action=action, key=key, who=who)
        except ConfigurationError as exc:
            return self.page(request, "error.html", 409, message=f"{action} refused: {exc}")
        done = f"{action}: done" if changed else f"{action}: no row changed"
        response = RedirectResponse(f"/message?{urlencode({'key': key, 'done': done})}", status_code=303)
        self.access.set_cookie(response, OPERATOR_COOKIE, who)
        return response

    async def dashboard(self, request: Request) -> Response:
        """`/dashboard`: outcomes per minute and the journal's counts."""
        data = await _data.dashboard(self.config, request.app.state.inbox)
        chart = stacked(data["per_minute"], start=data["since"], end=data["now"])
        return self.page(request, "dashboard.html", data=data, chart=chart, colors=COLORS)

    async def partners(self, request: Request) -> Response:
        """`/partners`: the control-number ledgers and what is wrong with them, of one partner or all."""
        partner = request.query_params.get("partner", "")[:200] or None
        if partner is not None and "\x00" in partner:
            return self.refuse(request, 400, "partner: a NUL is not allowed")
        ledgers = await _data.partners(self.config, request.app.state.inbox, partner=partner)
        findings = partners.findings(ledgers)
        window = duration_text(self.config.duplicate_window)
        return self.page(request, "partners.html", partner=partner, ledgers=ledgers, findings=findings, window=window)

    async def audit(self, request: Request) -> Response:
        """`/audit`: the actions operators took, newest first."""
        return self.page(request, "audit.html", rows=await _data.audit_rows(request.app.state.inbox))

    async def login(self, request: Request) -> Response:
        """`/login`: the token form, and signing in (throttled after wrong tokens)."""
        if request.method == "GET":
            return self.page(request, "login.html")
        status, wait = self.access.login(request, str(request.state.form.get("token", "")))
        if status == 303:
            return RedirectResponse("/", status_code=303)
        response = self.page(request, "login.html", status, wrong=status == 401, wait=wait)
        if wait:
            response.headers["Retry-After"] = str(wait)
        return response

    async def logout(self, request: Request) -> Response:
        """`POST /logout`: end the session."""
        self.access.logout(request)
        return RedirectResponse("/login" if self.access.token else "/", status_code=303)

    async def unavailable(self, request: Request, exc: Exception) -> Response:
        """A page asked of a database (or broker) that is down: 503 naming what is down and nothing of it (no user,
        no host), nothing changed; the journal's pool reconnects by itself, so the same request succeeds once the
        dependency is back."""
        what = "the database" if isinstance(exc, StoreError) else "the broker" if isinstance(exc, SourceError) else None
        down = f"{what} is unreachable" if what else "a dependency is unreachable"
        response = self.page(
            request, "error.html", 503, title="Unavailable", message=f"unavailable, try again shortly: {down}"
        )
        response.headers["Retry-After"] = str(RETRY_AFTER)
        return response


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
