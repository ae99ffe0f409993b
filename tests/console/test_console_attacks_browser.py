"""Same-site attacks on the console in headless Chromium, from a page served on another port of 127.0.0.1 (cookies
do not care about ports, and SameSite=Strict cookies go along: the page is the same site).

The attacker's server takes a real session and its CSRF token from the console (it can reach it as any local
process can), plants that session's cookie and the old `edinbox_csrf` cookie in the browser, suppresses the referrer
(so the browser sends `Origin: null`) and auto-submits a forget. It used to work; the console now refuses it, and a
frame of the console stays empty. The operator's own forget, in the same browser, still works.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from console.conftest import Console, free_port, run, serving
from hub_ops import show


@dataclass(frozen=True, slots=True)
class Attacker:
    """The attacking site: its address, and the journal key its pages try to forget."""

    url: str
    key: str


def _stolen_session(console: Console) -> tuple[dict[str, str], str]:
    """The cookies the console gives a new visitor (its session) and the CSRF token of its forms, asked of the
    console by the attacker's server."""
    response = httpx.get(console.url + "/confirm?action=forget&key=x", timeout=30)
    found = re.search(r'name="csrf" value="([^"]+)"', response.text)
    assert found is not None
    return dict(response.cookies), found.group(1)


def _pages(console: Console, key: str) -> dict[str, tuple[list[tuple[str, str]], str]]:
    """The attacker's pages: path -> (headers, body)."""
    cookies, csrf = _stolen_session(console)
    cookies.setdefault("edinbox_csrf", csrf)  # the double-submit cookie the console used to trust
    fields = {"action": "forget", "key": key, "operator": "intruder", "csrf": csrf}
    inputs = "".join(f'<input type="hidden" name="{n}" value="{escape(v)}">' for n, v in fields.items())
    submit = "<script>document.forms[0].submit()</script>"
    form = f'<form method="post" action="{console.url}/action">{inputs}</form>{submit}'
    plant = [("Set-Cookie", f"{name}={value}; Path=/") for name, value in cookies.items()]
    return {
        "/no-referrer": ([*plant, ("Referrer-Policy", "no-referrer")], form),
        "/plain": (plant, form),
        "/frame": ([], f'<iframe id="victim" src="{console.url}/parked/dead" width="800" height="600"></iframe>'),
    }


@pytest.fixture
def attacker(console: Console) -> Iterator[Attacker]:
    """A second HTTP server on another port of 127.0.0.1, serving the attacking pages."""
    traffic = console.traffic
    key = f"X12:ZZ:{traffic.processed.partner.id}>ZZ:EDINBOXHUB/{traffic.processed.control}"
    pages = _pages(console, key)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            headers, body = pages.get(self.path, ([], "no such page"))
            self.send_response(200 if self.path in pages else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield Attacker(f"http://127.0.0.1:{server.server_address[1]}", key)
    server.shutdown()
    server.server_close()


def _attack(page: Any, attacker: Attacker, path: str) -> tuple[int, dict[str, str]]:
    """Open the attacker's page; the status of the POST its form made, and the headers Chromium sent with it."""
    with page.expect_response(lambda response: response.url.endswith("/action")) as posted:
        page.goto(attacker.url + path)
    response = posted.value
    return response.status, response.request.all_headers()


def test_a_same_site_page_cannot_forge_a_forget(page: Any, console: Console, attacker: Attacker) -> None:
    """A page on another port with a planted session, its real CSRF token and no referrer (Origin: null), or with
    its own Origin, is refused with the console's 403 page; the message stays. The operator's own forget, in the
    same browser, then works."""
    status, sent = _attack(page, attacker, "/no-referrer")
    assert sent.get("origin") == "null"  # the finding's condition: the browser hides where the form comes from
    assert status == 403
    assert "does not come from the console" in page.locator("main").inner_text()
    status, sent = _attack(page, attacker, "/plain")
    assert sent.get("origin") == attacker.url
    assert status == 403
    assert run(show(console.config, attacker.key)) is not None
    page.goto(f"{console.url}/confirm?action=forget&key={attacker.key}")
    page.fill("input[name=operator]", "day-shift")
    page.click("#confirm")
    page.wait_for_load_state("networkidle")
    assert run(show(console.config, attacker.key)) is None
    assert "no journal row" in page.locator("main").inner_text()  # redirected to the forgotten row's page


def test_a_same_site_page_cannot_frame_the_console(page: Any, console: Console, attacker: Attacker) -> None:
    """The console refuses to be framed (frame-ancestors 'none', X-Frame-Options DENY): the frame shows none of it,
    while the same page opened directly shows its list."""
    with page.expect_response(lambda response: response.url.endswith("/parked/dead")) as framed:
        page.goto(attacker.url + "/frame")
    assert framed.value.status == 200  # the console answered; the browser refused to show it
    page.wait_for_load_state("load")
    frame = page.frame_locator("#victim")
    assert frame.locator("nav").count() == 0
    page.goto(console.url + "/parked/dead")
    assert page.locator("nav").count() == 1


def test_an_operator_logs_in_works_and_logs_out(page: Any, console: Console) -> None:
    """On a console with a token: the login page, a wrong token refused, the right one opens the pages (the session
    cookie HttpOnly and Strict, not the token), an action's form works, and the logout asks for the token again."""
    from edinbox.console import create_app

    token = "operator-token-0123456789"
    with serving(create_app(console.config, token=token)) as url:
        page.goto(url + "/parked/dead")
        assert page.url == url + "/login"
        page.fill("input[name=token]", "wrong-token-0123456789")
        page.click("button[type=submit]")
        assert "That is not the token" in page.locator("main").inner_text()
        page.fill("input[name=token]", token)
        page.click("button[type=submit]")
        page.wait_for_url(url + "/")
        cookies = {c["name"]: c for c in page.context.cookies()}
        session = cookies["edinbox_session"]
        assert session["httpOnly"]
        assert session["sameSite"] == "Strict"
        assert token not in session["value"]
        stuck = console.traffic.stuck
        key = f"X12:ZZ:{stuck.partner.id}>ZZ:EDINBOXHUB/{stuck.control}"
        page.goto(f"{url}/confirm?action=requeue&key={key}")
        page.fill("input[name=operator]", "night-shift")
        page.click("#confirm")
        page.wait_for_load_state("networkidle")
        assert "requeue: done" in page.locator(".notice").inner_text()
        page.click("#logout button")
        page.wait_for_url(url + "/login")
        page.goto(url + "/audit")
        assert page.url == url + "/login"
