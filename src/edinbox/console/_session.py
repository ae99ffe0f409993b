"""The console's sessions, CSRF tokens and login rate limit: values and arithmetic, no I/O.

A session is a cookie the server signed (HMAC-SHA256 with a secret only this process knows): a random id, when it
expires, and whether it logged in. It never holds the token. The CSRF token of a page is an HMAC of the session's id
under the same secret: a form is accepted only with the token of the session it comes with, so a cookie another
site planted (a page on another port of the same host can set cookies for it) is worth nothing without the secret.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

__all__ = ["Limiter", "Revoked", "Session", "Signer"]

SESSION_LIFETIME = timedelta(hours=8)
"""How long a session lasts from its start (logging in starts a new one); then the console asks for the token."""


@dataclass(frozen=True, slots=True)
class Session:
    """One browser's session: its random id, its end (Unix seconds), whether it gave the token."""

    id: str
    expires: int
    authenticated: bool = False


@dataclass(frozen=True, slots=True)
class Signer:
    """Signs and checks sessions and CSRF tokens with `secret` (random per process unless given)."""

    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    lifetime: timedelta = SESSION_LIFETIME
    clock: Callable[[], float] = time.time

    def start(self, *, authenticated: bool = False) -> Session:
        """A new session with a fresh id, ending `lifetime` from now."""
        expires = int(self.clock() + self.lifetime.total_seconds())
        return Session(secrets.token_urlsafe(18), expires, authenticated)

    def cookie(self, session: Session) -> str:
        """The cookie value of `session`: its fields and their signature."""
        body = f"{session.id}.{session.expires}.{int(session.authenticated)}"
        return f"{body}.{self._mac('session', body)}"

    def read(self, cookie: str) -> Session | None:
        """The session a cookie holds, or None when it is malformed, forged or expired."""
        parts = cookie.split(".")
        if len(parts) != 4 or len(cookie) > 200:
            return None
        sid, expires, flag, mac = parts
        if not hmac.compare_digest(mac.encode(), self._mac("session", f"{sid}.{expires}.{flag}").encode()):
            return None
        if not expires.isdigit() or flag not in ("0", "1") or int(expires) <= self.clock():
            return None
        return Session(sid, int(expires), flag == "1")

    def csrf(self, session: Session) -> str:
        """The CSRF token of every form this session is shown."""
        return self._mac("csrf", session.id)

    def check_csrf(self, session: Session | None, given: str) -> bool:
        """Whether `given` is the CSRF token of `session` (compared in constant time)."""
        return session is not None and bool(given) and hmac.compare_digest(given.encode(), self.csrf(session).encode())

    def _mac(self, purpose: str, text: str) -> str:
        digest = hmac.new(self.secret, f"{purpose}|{text}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


@dataclass(slots=True)
class Limiter:
    """Failed logins per client address: `free` failures, then each one more doubles the wait before the next try
    (1 s, 2 s, 4 s, ... at most `longest`); a success forgets the address. Bounded: at most `size` addresses kept."""

    free: int = 5
    longest: float = 300.0
    size: int = 10_000
    clock: Callable[[], float] = time.monotonic
    _failures: dict[str, tuple[int, float]] = field(default_factory=dict)

    def wait(self, address: str) -> int:
        """Seconds `address` must still wait before its next try (0: it may try now)."""
        count, last = self._failures.get(address, (0, 0.0))
        if count < self.free:
            return 0
        left = last + min(2.0 ** (count - self.free), self.longest) - self.clock()
        return max(0, math.ceil(left))

    def failed(self, address: str) -> None:
        """Count one failure of `address`."""
        count, _ = self._failures.pop(address, (0, 0.0))
        if len(self._failures) >= self.size:  # forget the address that failed longest ago
            del self._failures[next(iter(self._failures))]
        self._failures[address] = (count + 1, self.clock())

    def succeeded(self, address: str) -> None:
        """Forget the failures of `address`."""
        self._failures.pop(address, None)


@dataclass(slots=True)
class Revoked:
    """Sessions ended before their time (logged out): their ids, kept until they would have expired anyway, so a
    copied cookie stops working at the logout. Bounded: at most `size` ids, the oldest forgotten first."""

    size: int = 100_000
    clock: Callable[[], float] = time.time
    _ids: dict[str, int] = field(default_factory=dict)

    def add(self, session: Session) -> None:
        """End `session` now."""
        now = self.clock()
        for sid in [sid for sid, expires in self._ids.items() if expires <= now]:
            del self._ids[sid]
        if len(self._ids) >= self.size:
            del self._ids[next(iter(self._ids))]
        self._ids[session.id] = session.expires

    def __contains__(self, session: Session) -> bool:
        """Whether `session` was ended."""
        return session.id in self._ids
