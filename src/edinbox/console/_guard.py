"""What every request to the console passes before a page sees it, and what every response carries.

In order: the `Host` must be one the console answers to (loopback names, and those given with `--allowed-host`: a
DNS-rebinding page names its own host and gets 400); the session cookie is read (or a new one started); with a
token configured, nothing but the login page and the static files is served without a session that gave it (or an
`Authorization: Bearer` header); a POST must come from the console's own pages (a `null` or foreign `Origin`, or
`Sec-Fetch-Site` other than same-origin, is refused), fit in `MAX_FORM` bytes and carry the CSRF token of its
session. Every response says: no framing, no caching, no sniffing, no referrer beyond the console, and scripts and
styles from the console alone. An unexpected error is a 500 page without a traceback.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from edinbox._errors import ConfigurationError
from edinbox._logs import log_event
from edinbox.console._session import Limiter, Revoked, Session, Signer

__all__ = ["LOOPBACK_NAMES", "Access", "client_of", "guard", "host_name"]

LOGGER = logging.getLogger("edinbox.console")

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
"""The host names the console always answers to."""
MAX_FORM = 16 * 1024
"""The largest form body accepted, in bytes: the console's forms hold a key, a name and a token."""
MAX_FIELDS = 20
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # not no-referrer: the browser would then send `Origin: null` on our own forms
}
"""Sent with every response."""

Dispatch = Callable[[Request], Awaitable[Response]]
Refuse = Callable[[Request, int, str], Response]
"""Renders the console's error page: request, status, message."""


def host_name(text: str) -> str:
    """The host name of a `Host` header or an `--allowed-host` value: lower case, without port or brackets."""
    text = text.strip().lower()
    if text.startswith("["):
        return text[1:].split("]", 1)[0]
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


@dataclass(frozen=True, slots=True)
class Access:
    """Who may use the console and how its cookies are set: the token (None: no login), the host names it answers
    to besides loopback, whether it is served over TLS, the session signer, the login limiter and the sessions
    ended by a logout."""

    token: str | None = None
    hosts: frozenset[str] = LOOPBACK_NAMES
    tls: bool = False
    signer: Signer = field(default_factory=Signer)
    limiter: Limiter = field(default_factory=Limiter)
    revoked: Revoked = field(default_factory=Revoked)

    @classmethod
    def build(cls, *, token: str | None, allowed_hosts: Iterable[str] = (), tls: bool = False) -> Access:
        """Check the allowed host names (ConfigurationError for one that cannot be a host) and add loopback's."""
        hosts = set(LOOPBACK_NAMES)
        for given in allowed_hosts:
            name = host_name(given)
            if not name or any(c in name for c in "/\\@ \t?#*") or not name.isascii():
                raise ConfigurationError(f"--allowed-host {given!r} is not a host name")
            hosts.add(name)
        return cls(token=token, hosts=frozenset(hosts), tls=tls)

    @property
    def cookie_name(self) -> str:
        """The session cookie's name; `__Host-` over TLS, so no sibling domain can set it."""
        return "__Host-edinbox_session" if self.tls else "edinbox_session"

    def set_cookie(self, response: Response, name: str, value: str, *, max_age: int | None = None) -> None:
        """Set a cookie the way the console sets all of them: HttpOnly, SameSite=Strict, Secure over TLS."""
        response.set_cookie(name, value, max_age=max_age, httponly=True, samesite="strict", secure=self.tls, path="/")

    def bearer(self, request: Request) -> bool | None:
        """None without an `Authorization: Bearer` header, else whether it holds the token."""
        header = request.headers.get("Authorization", "")
        if not header.startswith("Bearer ") or self.token is None:
            return None
        return _same(header.removeprefix("Bearer "), self.token)

    def login(self, request: Request, given: str) -> tuple[int, int]:
        """Check a login: (status, seconds to wait). 303 and a new signed-in session in `request.state.session`;
        401 for a wrong token; 429 while this address must wait after too many failures (even the right token)."""
        address = client_of(request)
        wait = self.limiter.wait(address)
        if wait:
            return 429, wait
        if self.token is None or not _same(given, self.token):
            self.limiter.failed(address)
            return 401, self.limiter.wait(address)
        self.limiter.succeeded(address)
        request.state.session = self.signer.start(authenticated=True)  # a new id: no session fixation
        return 303, 0

    def logout(self, request: Request) -> None:
        """End the request's session for good (its cookie, even copied, opens nothing more) and start a new one."""
        self.revoked.add(request.state.session)
        request.state.session = self.signer.start()

    def session(self, request: Request) -> Session | None:
        """The session the request's cookie holds, or None: missing, forged, expired or logged out."""
        session = self.signer.read(request.cookies.get(self.cookie_name, ""))
        return None if session is None or session in self.revoked else session


def client_of(request: Request) -> str:
    """Whom the login limit counts for a request: its IPv4 address, or its IPv6 /64 (one host gets a whole /64, so
    counting single IPv6 addresses would give it billions of tries)."""
    host = request.client.host if request.client else ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


def _same(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode(), token.encode())


def guard(access: Access, refuse: Refuse) -> Callable[[Request, Dispatch], Awaitable[Response]]:
    """The console's middleware (see the module's docstring)."""

    async def dispatch(request: Request, call_next: Dispatch) -> Response:
        if host_name(request.headers.get("Host", "")) not in access.hosts:
            response: Response = PlainTextResponse(
                "this console does not answer to that host name (see edinbox console --allowed-host)", 400
            )
            return _headed(response)
        session = access.session(request)
        request.state.session = session or access.signer.start()
        request.state.csrf = access.signer.csrf(request.state.session)
        response = await _checked(request, call_next, access, refuse)
        if request.state.session is not session:  # new, or the login replaced it
            new: Session = request.state.session
            value = access.signer.cookie(new)
            access.set_cookie(response, access.cookie_name, value, max_age=int(access.signer.lifetime.total_seconds()))
        return _headed(response)

    return dispatch


async def _checked(request: Request, call_next: Dispatch, access: Access, refuse: Refuse) -> Response:
    """The request's answer: a refusal, or the page's (a 500 page for an unexpected error)."""
    if any("\x00" in text for pair in request.query_params.multi_items() for text in pair):
        return refuse(request, 400, "a NUL character is not allowed in a query")
    public = request.url.path.startswith("/static/") or request.url.path == "/login"
    if access.token is not None and not public:
        refusal = _unauthorised(request, access, refuse)
        if refusal is not None:
            return refusal
    if request.method == "POST":
        refusal = await _post_refusal(request, access, refuse)
        if refusal is not None:
            return refusal
    try:
        return await call_next(request)
    except Exception as exc:
        log_event(
            LOGGER, logging.ERROR, "console-error", {"path": request.url.path, "error": f"{type(exc).__name__}: {exc}"}
        )
        return refuse(request, 500, "the console failed to answer this request (the error is in its log)")


def _unauthorised(request: Request, access: Access, refuse: Refuse) -> Response | None:
    """The refusal of a request without the token (a redirect to the login page for a page), or None."""
    address = client_of(request)
    bearer = access.bearer(request)
    if bearer is not None:
        wait = access.limiter.wait(address)
        if wait:
            return _later(refuse(request, 429, f"too many wrong tokens: try again in {wait} s"), wait)
        if bearer:
            return None
        access.limiter.failed(address)
        return refuse(request, 401, "that is not the token")
    if request.state.session.authenticated:
        return None
    if request.method in ("GET", "HEAD"):
        return RedirectResponse("/login", status_code=303)
    return refuse(request, 401, "this console needs its token: log in first")


async def _post_refusal(request: Request, access: Access, refuse: Refuse) -> Response | None:
    """Why a POST is refused (None when it is not); its form is left in `request.state.form`."""
    origin = request.headers.get("Origin")
    site = request.headers.get("Sec-Fetch-Site", "same-origin")
    if origin == "null" or site not in ("same-origin", "none"):
        return refuse(request, 403, "refused: this request does not come from the console's own pages")
    if origin and urlsplit(origin).netloc.lower() != request.headers.get("Host", "").lower():
        return refuse(request, 403, "refused: this request comes from another site")
    if request.headers.get("Content-Type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        return refuse(request, 415, "refused: a form is sent url-encoded")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM:
            return refuse(request, 413, f"refused: a form is at most {MAX_FORM} bytes")
    try:
        pairs = parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True, max_num_fields=MAX_FIELDS)
    except ValueError:
        return refuse(request, 400, f"refused: a form has at most {MAX_FIELDS} fields")
    if any("\x00" in text for pair in pairs for text in pair):
        return refuse(request, 400, "refused: a NUL character is not allowed in a form")
    request.state.form = dict(reversed(pairs))  # the first value of each field, as Starlette's form.get gives
    if not access.signer.check_csrf(request.state.session, request.state.form.get("csrf", "")):
        return refuse(request, 403, "refused: the form's CSRF token is missing or wrong (reload the page, try again)")
    return None


def _later(response: Response, wait: int) -> Response:
    response.headers["Retry-After"] = str(wait)
    return response


def _headed(response: Response) -> Response:
    for name, value in HEADERS.items():
        response.headers[name] = value
    return response
