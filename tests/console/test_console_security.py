"""The console's access rules without a browser: where it may listen, the token (never from argv, strong enough,
asked on every page), the signed and expiring session cookie, the login limit, allowed hosts, the CSRF checks of
every POST and the headers on every response."""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from edinbox._errors import ConfigurationError
from edinbox.console import check_bind, check_token, create_app
from edinbox.console._session import Limiter, Revoked, Session
from edinbox.hub import HubConfig
from hub_ops import init

TOKEN = "correct-horse-battery-staple"
BASE = "http://127.0.0.1:8080"
CONFIRM = "/confirm?action=forget&key=x"
"""A page with a form (its CSRF token)."""


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> HubConfig:
    """A journal `init` prepared, in an SQLite file."""
    config = HubConfig(db=f"sqlite:///{tmp_path_factory.mktemp('security') / 'h.db'}")
    asyncio.run(init(config))
    return config


@pytest.fixture
def client(config: HubConfig) -> Iterator[TestClient]:
    """A client of a token-protected console, on its loopback address."""
    with TestClient(create_app(config, token=TOKEN), base_url=BASE, follow_redirects=False) as client:
        yield client


def csrf_of(client: TestClient, path: str = "/login") -> str:
    """The CSRF token the page at `path` gives its forms."""
    found = re.search(r'name="csrf" value="([^"]+)"', client.get(path).text)
    assert found is not None
    return found.group(1)


def log_in(client: TestClient) -> None:
    """Log in with the right token."""
    assert client.post("/login", data={"csrf": csrf_of(client), "token": TOKEN}).status_code == 303


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "::", "example.com"])  # noqa: S104 - refused binds
def test_a_non_loopback_bind_needs_a_token_and_tls(host: str) -> None:
    """Any address but loopback is refused without a token, then without TLS unless plain HTTP is asked for."""
    with pytest.raises(ConfigurationError, match="--token-file"):
        check_bind(host, None)
    with pytest.raises(ConfigurationError, match="--certfile"):
        check_bind(host, TOKEN)
    check_bind(host, TOKEN, tls=True)
    check_bind(host, TOKEN, allow_http=True)


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_loopback_binds_need_no_token(host: str) -> None:
    """Loopback addresses serve without a token."""
    check_bind(host, None)


@pytest.mark.parametrize("token", ["", " " * 20, "x", "s3cret", "a" * 15, "a" * 16 + "\n", "abcdefgh\x00ijklmnop"])
def test_a_weak_token_is_refused(token: str, config: HubConfig) -> None:
    """A blank, short (under 16 characters) or non-printable token is a configuration error, by the app too."""
    with pytest.raises(ConfigurationError, match="token"):
        check_token(token)
    with pytest.raises(ConfigurationError, match="token"):
        create_app(config, token=token)


def console_command(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `edinbox console` with `args` (it must fail before listening)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")}
    return subprocess.run(
        [sys.executable, "-m", "edinbox.cli", "console", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**environ, **(env or {})},
    )


def refusal(*args: str, env: dict[str, str] | None = None) -> str:
    """Run `edinbox console` with `args`, which must exit 1 with one line on stderr; that line."""
    proc = console_command(*args, env=env)
    assert proc.returncode == 1, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    return proc.stderr


def test_console_command_refuses_to_start_on_all_interfaces_without_a_token(tmp_path: Path) -> None:
    """`edinbox console --host 0.0.0.0` without a token exits 1 with one line naming --token-file."""
    assert "--token-file" in refusal("--db", f"sqlite:///{tmp_path}/h.db", "--host", "0.0.0.0")  # noqa: S104


def test_console_command_refuses_a_token_in_argv(tmp_path: Path) -> None:
    """`--token VALUE` (visible in `ps`) exits 1 with one line naming the file and the variable, not the value."""
    line = refusal("--db", f"sqlite:///{tmp_path}/h.db", "--token", TOKEN)
    assert "--token-file" in line
    assert "EDINBOX_CONSOLE_TOKEN" in line
    assert TOKEN not in line


def test_console_command_refuses_a_weak_or_unreadable_token(tmp_path: Path) -> None:
    """A short token from the environment or a file, an unreadable or oversized file, a FIFO, or both sources
    given: exit 1 with one line."""
    db = f"sqlite:///{tmp_path}/h.db"
    assert "16 characters" in refusal("--db", db, env={"EDINBOX_CONSOLE_TOKEN": "short"})
    weak = tmp_path / "weak"
    weak.write_text("short\n")
    assert "16 characters" in refusal("--db", db, "--token-file", str(weak))
    assert "cannot read" in refusal("--db", db, "--token-file", str(tmp_path / "missing"))
    big = tmp_path / "big"
    big.write_text("x" * 5000)
    assert "4096 bytes" in refusal("--db", db, "--token-file", str(big))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert "not a regular file" in refusal("--db", db, "--token-file", str(fifo))
    good = tmp_path / "good"
    good.write_text(TOKEN + "\n")
    assert "not both" in refusal("--db", db, "--token-file", str(good), env={"EDINBOX_CONSOLE_TOKEN": TOKEN})


def test_console_command_refuses_plain_http_beyond_loopback(tmp_path: Path) -> None:
    """A token read from its file but no TLS on 0.0.0.0 exits 1 naming --certfile; half a TLS pair, or a pair
    that does not load, exits 1 too."""
    db = f"sqlite:///{tmp_path}/h.db"
    good = tmp_path / "good"
    good.write_text(TOKEN + "\n")
    assert "--certfile" in refusal("--db", db, "--token-file", str(good), "--host", "0.0.0.0")  # noqa: S104
    assert "both" in refusal("--db", db, "--certfile", str(good))
    assert "do not load" in refusal("--db", db, "--certfile", str(good), "--keyfile", str(good))


def test_with_a_token_every_page_asks_for_it(client: TestClient) -> None:
    """With a token: pages redirect to the login, a wrong token is refused, the right one (form or bearer) opens."""
    assert client.get("/").status_code == 303
    assert client.get("/").headers["location"] == "/login"
    assert client.post("/action", data={"action": "forget", "key": "a/b"}).status_code == 401
    assert client.get("/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    wrong = client.post("/login", data={"csrf": csrf_of(client), "token": "guess"})
    assert wrong.status_code == 401
    log_in(client)
    assert client.get("/").status_code == 200
    assert client.get("/dashboard").status_code == 200


def test_the_session_cookie_is_signed_expiring_and_not_the_token(config: HubConfig) -> None:
    """After the login the cookie is a signed session (not the token) marked HttpOnly and SameSite=Strict, with a
    Max-Age; a forged or altered cookie opens nothing; once the session expires the token is asked again."""
    app = create_app(config, token=TOKEN, session_lifetime=timedelta(seconds=2))
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        csrf = csrf_of(client)
        response = client.post("/login", data={"csrf": csrf, "token": TOKEN})
        cookie = response.headers["set-cookie"]
        assert TOKEN not in cookie
        assert "HttpOnly" in cookie
        assert "SameSite=strict" in cookie
        assert "Max-Age=2" in cookie
        assert "Secure" not in cookie  # plain HTTP: a Secure cookie would never come back
        assert client.get("/").status_code == 200
        value = client.cookies["edinbox_session"]
        sid, expires, _, mac = value.split(".")
        for forged in (f"{sid}.{int(expires) + 9999}.1.{mac}", f"{sid}.{expires}.1.{mac[:-2]}xx", TOKEN):
            client.cookies.set("edinbox_session", forged)
            assert client.get("/").status_code == 303
        client.cookies.set("edinbox_session", value)
        assert client.get("/").status_code == 200
        time.sleep(3)
        assert client.get("/").status_code == 303


def test_a_signed_out_session_cannot_claim_to_be_signed_in(config: HubConfig) -> None:
    """The unauthenticated session every visitor gets, with its flag switched to 1, is refused (the signature
    covers the flag)."""
    with TestClient(create_app(config, token=TOKEN), base_url=BASE, follow_redirects=False) as client:
        client.get("/login")
        sid, expires, flag, mac = client.cookies["edinbox_session"].split(".")
        assert flag == "0"
        client.cookies.set("edinbox_session", f"{sid}.{expires}.1.{mac}")
        assert client.get("/").status_code == 303


def test_logins_are_limited_per_address(client: TestClient) -> None:
    """Five wrong tokens, then every try (even the right token, even as a bearer) is 429 with Retry-After until
    the wait is over."""
    csrf = csrf_of(client)
    for _ in range(5):
        assert client.post("/login", data={"csrf": csrf, "token": "guess-guess-guess"}).status_code == 401
    blocked = client.post("/login", data={"csrf": csrf, "token": TOKEN})
    assert blocked.status_code == 429
    assert int(blocked.headers["Retry-After"]) >= 1
    assert "try again in" in blocked.text
    assert client.get("/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 429
    time.sleep(int(blocked.headers["Retry-After"]) + 0.2)
    assert client.post("/login", data={"csrf": csrf, "token": TOKEN}).status_code == 303


def test_the_login_wait_doubles_and_is_bounded() -> None:
    """The limiter lets five failures through, then doubles the wait after each (1, 2, 4, ... s) up to its
    longest; a success forgets the address, and it keeps at most `size` addresses."""
    now = [1000.0]
    limiter = Limiter(longest=8, size=3, clock=lambda: now[0])
    waits = []
    for _ in range(10):
        waits.append(limiter.wait("a"))
        limiter.failed("a")
    assert waits == [0, 0, 0, 0, 0, 1, 2, 4, 8, 8]
    now[0] += 8
    assert limiter.wait("a") == 0
    limiter.succeeded("a")
    limiter.failed("a")
    assert limiter.wait("a") == 0
    for address in ("b", "c", "d"):
        limiter.failed(address)
    assert "a" not in limiter._failures
    assert len(limiter._failures) == 3


def test_an_oversized_or_crowded_form_is_refused(client: TestClient) -> None:
    """A login form over 16 KiB is 413, one with hundreds of fields 400, and neither counts as a guess."""
    csrf = csrf_of(client)
    assert client.post("/login", data={"csrf": csrf, "token": "x" * 100_000}).status_code == 413
    crowded = "&".join(f"f{i}=1" for i in range(500))
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    assert client.post("/login", content=crowded, headers=headers).status_code == 400
    log_in(client)


def test_a_request_for_another_host_is_refused(config: HubConfig) -> None:
    """A request naming a host the console does not answer to (DNS rebinding) is 400; loopback names with any port
    and an --allowed-host name are served."""
    with TestClient(create_app(config, allowed_hosts=["console.example.net"]), follow_redirects=False) as client:
        for host in ("rebind.evil.example", "rebind.evil.example:8080", "127.0.0.1.evil.example", "", "evil:80:80"):
            response = client.get("/", headers={"Host": host})
            assert response.status_code == 400, host
            assert "--allowed-host" in response.text
        for host in ("127.0.0.1:8080", "localhost", "LOCALHOST:1", "[::1]:8080", "console.example.net:443"):
            assert client.get("/", headers={"Host": host}).status_code == 200, host


def test_every_response_forbids_framing_caching_and_sniffing(client: TestClient) -> None:
    """Pages, redirects, refusals, static files and the 400 for a foreign host all carry the security headers."""
    responses = [
        client.get("/"),
        client.get("/login"),
        client.get("/static/console.css"),
        client.post("/login", data={"token": "x"}),
        client.get("/", headers={"Host": "rebind.evil.example"}),
    ]
    log_in(client)
    responses += [client.get("/"), client.get("/parked/nothing"), client.get("/?page=0")]
    for response in responses:
        policy = response.headers["Content-Security-Policy"]
        assert "frame-ancestors 'none'" in policy
        assert "default-src 'self'" in policy
        assert response.headers["X-Frame-Options"] == "DENY"
        assert response.headers["Cache-Control"] == "no-store"
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Referrer-Policy"] == "same-origin"


def forget(client: TestClient, csrf: str, headers: dict[str, str] | None = None) -> int:
    """POST a forget of a key that does not exist with `csrf`; the status."""
    data = {"csrf": csrf, "action": "forget", "key": "ZZ:A>ZZ:B/1", "operator": "x"}
    return client.post("/action", data=data, headers=headers or {}).status_code


def test_csrf_tokens_are_bound_to_the_session(config: HubConfig) -> None:
    """A form is accepted with its own session's token only: the old double-submit trick (a planted cookie and the
    same value in the form), a made-up token and another session's token are 403."""
    with TestClient(create_app(config), base_url=BASE, follow_redirects=False) as client:
        csrf = csrf_of(client, CONFIRM)
        assert forget(client, csrf) == 303
        client.cookies.set("edinbox_csrf", "planted")
        assert forget(client, "planted") == 403
        assert forget(client, "") == 403
        with TestClient(create_app(config), base_url=BASE) as other:
            assert forget(client, csrf_of(other, CONFIRM)) == 403
        refused = client.post("/action", data={"csrf": "planted"})
        assert "CSRF" in refused.text
        assert "<h1>" in refused.text or '<p class="error">' in refused.text  # the console's page, not a bare line


def test_posts_from_other_origins_are_refused_even_with_a_valid_token(config: HubConfig) -> None:
    """A POST with the right session and token is still 403 when the browser says it comes from elsewhere:
    `Origin: null` (referrer suppressed), another port's or host's Origin, or Sec-Fetch-Site same-site/cross-site."""
    with TestClient(create_app(config), base_url=BASE, follow_redirects=False) as client:
        csrf = csrf_of(client, CONFIRM)
        for headers in (
            {"Origin": "null"},
            {"Origin": "http://127.0.0.1:9999"},
            {"Origin": "http://evil.example"},
            {"Sec-Fetch-Site": "same-site"},
            {"Sec-Fetch-Site": "cross-site"},
        ):
            assert forget(client, csrf, headers) == 403, headers
        assert forget(client, csrf, {"Origin": BASE, "Sec-Fetch-Site": "same-origin"}) == 303


def test_console_command_refuses_a_database_without_the_schema(tmp_path: Path) -> None:
    """`edinbox console` on a database `init` never prepared exits 1 with one line naming `edinbox init`."""
    assert "edinbox init" in refusal("--db", f"sqlite:///{tmp_path}/empty.db")


def test_logging_out_ends_the_session_even_for_a_copied_cookie(client: TestClient) -> None:
    """After the logout button's POST the console asks for the token again, and the cookie it had (copied before)
    opens nothing more."""
    log_in(client)
    home = client.get("/")
    assert 'action="/logout"' in home.text
    copied = client.cookies["edinbox_session"]
    found = re.search(r'id="logout".*?name="csrf" value="([^"]+)"', home.text)
    assert found is not None
    out = client.post("/logout", data={"csrf": found.group(1)})
    assert out.status_code == 303
    assert out.headers["location"] == "/login"
    assert client.get("/").status_code == 303
    client.cookies.set("edinbox_session", copied)
    assert client.get("/").status_code == 303


def test_logged_out_sessions_are_kept_until_they_expire_and_bounded() -> None:
    """A logged-out session stays refused until its own expiry, then is forgotten; at most `size` are kept."""
    now = [1000.0]
    revoked = Revoked(size=2, clock=lambda: now[0])
    first, second, third = Session("a", 1010), Session("b", 1100), Session("c", 1100)
    revoked.add(first)
    assert first in revoked
    assert second not in revoked
    now[0] = 1020
    revoked.add(second)
    assert first not in revoked  # expired anyway: no longer kept
    revoked.add(third)
    assert second in revoked
    assert third in revoked
    revoked.add(Session("d", 1100))
    assert second not in revoked  # the bound: the oldest is dropped


def test_console_command_warns_of_plain_http_and_a_wildcard_without_allowed_hosts(tmp_path: Path) -> None:
    """On 0.0.0.0 with --allow-http and no --allowed-host the command warns of both before it starts (here it then
    stops at the database `init` never prepared, so nothing listens)."""
    token = tmp_path / "token"
    token.write_text(TOKEN)
    sqlite3.connect(tmp_path / "empty.db").close()  # a database without the schema
    args = ["--db", f"sqlite:///{tmp_path}/empty.db", "--token-file", str(token), "--allow-http"]
    proc = console_command(*args, "--host", "0.0.0.0")  # noqa: S104 - never listens: the schema is missing
    assert proc.returncode == 1
    assert "travel in clear" in proc.stderr
    assert "--allowed-host" in proc.stderr
    assert "edinbox init" in proc.stderr
    quiet = console_command(*args, "--host", "0.0.0.0", "--allowed-host", "console.example.net")  # noqa: S104
    assert "--allowed-host" not in quiet.stderr


def test_an_unexpected_error_is_a_500_page_without_a_traceback(
    config: HubConfig, caplog: pytest.LogCaptureFixture
) -> None:
    """An error no page expected (here a route added to raise one) answers the console's 500 page with the security
    headers and no traceback, and is logged in one line with its password masked."""

    async def boom(request: object) -> None:
        raise RuntimeError("postgresql://app:hunter2-secret@db/hub refused")

    app = create_app(config)
    app.add_route("/boom", boom)
    with TestClient(app, base_url=BASE, raise_server_exceptions=False) as client:
        response = client.get("/boom")
    assert response.status_code == 500
    assert "the console failed to answer" in response.text
    assert "Traceback" not in response.text
    assert "hunter2" not in response.text
    assert response.headers["Cache-Control"] == "no-store"
    logged = [r.getMessage() for r in caplog.records if "console-error" in r.getMessage()]
    assert len(logged) == 1
    assert "RuntimeError" in logged[0]
    assert "hunter2" not in logged[0]


@pytest.mark.parametrize(
    ("host", "counted"),
    [
        ("192.0.2.7", "192.0.2.7"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("testclient", "testclient"),
    ],
)
def test_the_login_limit_counts_an_ipv6_client_by_its_slash_64(host: str, counted: str) -> None:
    """IPv4 addresses count alone (also written IPv4-mapped), IPv6 ones by their /64: a host that owns a /64
    cannot get fresh tries by changing address."""
    from starlette.requests import Request

    from edinbox.console._guard import client_of

    assert client_of(Request({"type": "http", "client": (host, 1234), "headers": []})) == counted
