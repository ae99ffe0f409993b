"""AS2 outbound: the publisher of an `as2://` (HTTP) or `as2s://` (HTTPS) destination, a partner's AS2 endpoint.

`as2://HOST:PORT/PATH?from=OUR_NAME&to=PARTNER_NAME&certificate=PARTNER.pem&key=OUR.key&hub_certificate=OUR.pem`
`[&security=signed+encrypted&wait=60&attempts=3]`: each message goes signed with our key and encrypted for the
partner's certificate as `security` says, its Message-ID made from the outbox key (a resend by the relay has the
same one, so the partner's duplicate check answers it), and asks for a signed MDN, synchronously.

A message is sent when its MDN says "processed" with the MIC of what was sent, signed by the partner's certificate.
- an MDN "processed/error", with another MIC, or whose signature is not the partner's: PermanentError (the relay
  parks the row with that reason);
- the partner unreachable, or answering 5xx: SourceError (transient: the relay waits it out with backoff);
- no MDN within `wait` seconds (the request timed out, or was answered without one): tried again after 1, 2, 4 ...
  seconds, `attempts` times in all, then PermanentError ("no MDN ... after N attempts").
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.parse
from collections.abc import Sequence
from typing import Any

from edinbox._errors import ConfigurationError, PermanentError, SourceError
from edinbox.sources import _as2_mdn as mdn
from edinbox.sources import _as2_mime as mime
from edinbox.sources import _as2_smime as smime
from edinbox.sources._as2_smime import As2Failure, Identity
from edinbox.sources._base import Outgoing, Publisher
from edinbox.sources._options import positive_float, positive_int, split_url

__all__ = ["As2Publisher", "MdnPublisher"]

_SECURITY = ("signed+encrypted", "signed", "encrypted", "none")
_OPTIONS = "signed-receipt-protocol=required, pkcs7-signature; signed-receipt-micalg=required, sha-256"


def _text(name: str, value: Any) -> str:
    text = str(value)
    if not text or len(text) > 128 or any(c in text for c in '"\\\r\n'):
        raise ValueError(f"{name} must be 1-128 characters without quotes or line breaks")
    return text


def _kind(payload: bytes) -> str:
    """The Content-Type of an EDI payload (RFC 1767): X12, EDIFACT, or anything else."""
    head = payload.lstrip()[:3]
    if head == b"ISA":
        return "application/edi-x12"
    if head in (b"UNA", b"UNB"):
        return "application/edifact"
    return "application/octet-stream"


class As2Publisher(Publisher):
    """Sends messages to one partner's AS2 endpoint, each settled by its signed MDN (see the module)."""

    def __init__(self, url: str) -> None:
        """Read the destination's options (ConfigurationError for a bad one); files are read by `open`."""
        parts, opts = split_url(url, schemes=("as2", "as2s"), overrides={})
        self.sender = opts.require("from", _text)
        self.receiver = opts.require("to", _text)
        self._files = (opts.require("certificate", _text), opts.require("key", _text))
        self._hub_certificate = opts.require("hub_certificate", _text)
        self.security = opts.take("security", lambda _, v: _choice(v), "signed+encrypted")
        self.wait = opts.take("wait", positive_float, 60.0)
        self.attempts = opts.take("attempts", positive_int, 3)
        opts.finish()
        if not parts.hostname or parts.port is None:
            raise ConfigurationError(f"destination {url!r}: an AS2 partner is as2://HOST:PORT/PATH?from=...&to=...")
        scheme = "https" if parts.scheme == "as2s" else "http"
        self.endpoint = f"{scheme}://{parts.hostname}:{parts.port}{parts.path or '/'}"
        where = f"{parts.scheme}://{parts.hostname}:{parts.port}{parts.path or '/'}"
        self.url = f"{where}?to={urllib.parse.quote(self.receiver)}"
        self._ours: Identity | None = None
        self._theirs: Identity | None = None
        self._client: Any = None

    async def open(self) -> None:
        """Read the certificates and our key (ConfigurationError when one cannot be read)."""
        import httpx

        self._theirs = Identity(smime.load_certificate(self._files[0]))
        self._ours = smime.load_identity(self._hub_certificate, self._files[1])
        self._client = httpx.AsyncClient(timeout=self.wait)

    async def send(self, messages: Sequence[Outgoing]) -> None:
        """Send each message in order, returning once each one's MDN said it was processed."""
        for message in messages:
            await self._send_one(message)

    def _wrap(self, payload: bytes) -> tuple[str, bytes, str]:
        """The message's Content-Type and body, and the MIC its MDN must report: of the entity signed or encrypted
        (RFC 4130 7.3.1), or of the payload under its Content-Type when sent as it is."""
        if self._ours is None or self._theirs is None:
            raise SourceError(f"{self.url}: the publisher is not open")
        kind = _kind(payload)
        if self.security == "none":
            return kind, payload, smime.mic(f"Content-Type: {kind}\r\n\r\n".encode() + payload, "sha256")
        content = mime.entity(kind, payload)
        expected = smime.mic(content, "sha256")
        content_type, body = kind, content
        if "signed" in self.security:
            content_type, body = mime.signed(content, self._ours)
            content = f"Content-Type: {content_type}\r\n\r\n".encode() + body
        if "encrypted" in self.security:
            body = smime.encrypt(content, self._theirs.certificate)
            content_type = 'application/pkcs7-mime; smime-type=enveloped-data; name="smime.p7m"'
        return content_type, body, expected

    async def _send_one(self, message: Outgoing) -> None:
        import httpx

        content_type, body, expected = self._wrap(message.payload)
        headers = {
            "AS2-Version": "1.2",
            "AS2-From": f'"{self.sender}"' if " " in self.sender else self.sender,
            "AS2-To": f'"{self.receiver}"' if " " in self.receiver else self.receiver,
            "Message-ID": f"<{urllib.parse.quote(message.message_id, safe='')}@{urllib.parse.quote(self.sender)}>",
            "MIME-Version": "1.0",
            "Content-Type": content_type,
            "Disposition-Notification-To": self.sender,
            "Disposition-Notification-Options": _OPTIONS,
        }
        for attempt in range(1, self.attempts + 1):
            try:
                answer = await self._client.post(self.endpoint, content=body, headers=headers)
            except httpx.TimeoutException:
                answer = None
            except httpx.HTTPError as exc:
                raise SourceError(f"{self.url}: {type(exc).__name__}: {exc}") from None
            if answer is not None and answer.status_code >= 500:
                raise SourceError(f"{self.url}: the partner answered {answer.status_code}")
            if answer is not None and answer.status_code >= 400:
                raise PermanentError(f"{self.url}: the partner refused the message: HTTP {answer.status_code}")
            if answer is not None and answer.content:
                self._check(answer, expected)
                return
            if attempt < self.attempts:
                await asyncio.sleep(min(2.0 ** (attempt - 1), 60.0))
        raise PermanentError(f"{self.url}: no MDN within {self.wait:g} s after {self.attempts} attempts")

    def _check(self, answer: Any, expected: str) -> None:
        """PermanentError unless the MDN is the partner's, says processed, and reports the MIC of what was sent."""
        try:
            verdict = mdn.read({k.lower(): v for k, v in answer.headers.items()}, answer.content, partner=self._theirs)
        except As2Failure as exc:
            raise PermanentError(f"{self.url}: the MDN cannot be accepted: {exc}") from None
        if not verdict.processed:
            raise PermanentError(f"{self.url}: the partner's MDN says processed/error: {verdict.modifier}")
        if verdict.mic.replace(" ", "").lower() != expected.replace(" ", "").lower():
            raise PermanentError(f"{self.url}: the MDN's MIC {verdict.mic!r} is not that of the message sent")

    async def aclose(self) -> None:
        """Close the HTTP client; never raises."""
        if self._client is not None:
            client, self._client = self._client, None
            with contextlib.suppress(Exception):  # closing never raises
                await client.aclose()


def _choice(value: Any) -> str:
    if str(value) not in _SECURITY:
        raise ValueError(f"one of {', '.join(_SECURITY)}")
    return str(value)


class MdnPublisher(Publisher):
    """Delivers stored receipts (a blob of headers and body, see `_as2_mdn`) to `mdn+http(s)://...`, the URL an AS2
    sender gave for its asynchronous MDN: a 2xx answer settles it; 4xx is permanent; 5xx or no answer transient."""

    def __init__(self, url: str) -> None:
        """Nothing is connected until `open`."""
        target = url[len("mdn+") :]
        parts = urllib.parse.urlsplit(target)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigurationError(f"destination {url!r}: an MDN goes to mdn+http(s)://HOST[:PORT]/PATH")
        self.target = target
        self.url = url
        self._client: Any = None

    async def open(self) -> None:
        """Make the HTTP client."""
        import httpx

        self._client = httpx.AsyncClient(timeout=30.0)

    async def send(self, messages: Sequence[Outgoing]) -> None:
        """POST each receipt, in order."""
        import httpx

        for message in messages:
            headers, body = mdn.headers_of(message.payload)
            try:
                answer = await self._client.post(self.target, content=body, headers=headers)
            except httpx.HTTPError as exc:
                raise SourceError(f"{self.url}: {type(exc).__name__}: {exc}") from None
            if answer.status_code >= 500:
                raise SourceError(f"{self.url}: answered {answer.status_code}")
            if answer.status_code >= 300:
                raise PermanentError(f"{self.url}: the MDN was refused: HTTP {answer.status_code}")

    async def aclose(self) -> None:
        """Close the HTTP client; never raises."""
        if self._client is not None:
            client, self._client = self._client, None
            with contextlib.suppress(Exception):  # closing never raises
                await client.aclose()
