"""AS2 inbound (RFC 4130) as a source: an HTTP endpoint whose messages are settled like any broker's deliveries.

`as2://HOST:PORT/PATH[?wait=S&max_body=BYTES&read_timeout=S&max_waiting=N&reuse_port=1]` listens on HOST:PORT
for POSTs to PATH (with `reuse_port`, several hubs listen on the one port and the kernel spreads connections). Each
message is matched to its partner by (AS2-From, AS2-To), its layers undone (decrypted with our key, its signature
checked against the partner's certificate, decompressed), and handed to the consumer as a delivery keyed by its AS2
Message-ID (source `as2:FROM>TO`). The HTTP answer waits for the settlement, at most `wait` seconds:

- `ack` (committed): the receipt (a signed MDN "processed" with the MIC of what was received, when the sender asked
  for one; an empty 200 when it did not) is stored, then answered;
- `reject` (parked: an unknown partner, a bad signature, a payload that cannot be decrypted, too little security
  for the agreement, or data the consumer refused): a negative MDN "processed/error: <RFC 4130 modifier>" is stored,
  then answered;
- `nack`, a stop, `wait` passing, or `max_waiting` messages already waiting: 503 with Retry-After and no receipt;
  the sender resends later. A message settled after its answer was given up still has its receipt stored, for the
  resend. An asynchronous MDN (Receipt-Delivery-Option) is answered with an empty 200 and sent by the store.

A message whose (AS2-From, AS2-To, Message-ID) has a stored receipt is answered with it, byte for byte, and never
handed over again: a resend, the same bytes or re-signed, creates nothing. One whose first attempt never settled (the
process killed before its commit) has no receipt and is handed over again. The receipts live where `receipts` keeps
them (the hub: a table beside its journal, written after the commit); without one, in this process's memory only.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

from edinbox._errors import ConfigurationError, SourceError, TransientError
from edinbox.sources import _as2_mdn as mdn
from edinbox.sources import _as2_smime as smime
from edinbox.sources._as2_http import Answer, Listener, Request
from edinbox.sources._as2_mime import entity, signed, unwrap
from edinbox.sources._as2_send import As2Publisher, MdnPublisher
from edinbox.sources._as2_smime import As2Failure, Identity, encrypt, load_certificate, load_identity
from edinbox.sources._base import Delivery, Outgoing, Publisher, Source, publish_once
from edinbox.sources._options import positive_float, positive_int, split_url

__all__ = [
    "PUBLISHER",
    "SECURITY",
    "SOURCE",
    "As2Publisher",
    "As2Source",
    "Partner",
    "Receipts",
    "load_certificate",
    "load_identity",
    "open_publisher",
    "publish",
    "sealed",
]

SECURITY = ("signed+encrypted", "signed", "encrypted", "none")
"""What an agreement requires of a partner's messages at least (and applies to what is sent to it)."""

_RETRY_AFTER = "60"


@dataclass(frozen=True, slots=True)
class Partner:
    """One AS2 agreement: the partner's AS2 name and certificate, ours and our key, and what its messages carry."""

    name: str
    """The partner's AS2 name (AS2-From of what it sends)."""
    hub: str
    """Our AS2 name in this agreement (AS2-To of what it sends)."""
    certificate: str
    """The partner's certificate file (PEM or DER): its signatures are checked against it."""
    key: str
    """Our private key file: decrypts what the partner sends, signs our receipts."""
    hub_certificate: str
    """Our certificate file (the key's)."""
    security: str = "signed+encrypted"
    url: str = ""
    """The partner's AS2 endpoint, for what the hub sends to it."""

    def __post_init__(self) -> None:
        """Refuse a security level that does not exist, and names AS2 cannot carry."""
        if self.security not in SECURITY:
            raise ConfigurationError(f"as2_security must be one of {', '.join(SECURITY)}, not {self.security!r}")
        for name in (self.name, self.hub):
            if not name or len(name) > 128 or any(c in name for c in '"\\\r\n'):
                raise ConfigurationError(f"an AS2 name must be 1-128 characters without quotes, not {name!r}")


@dataclass(frozen=True, slots=True)
class _Loaded:
    partner: Partner
    theirs: Identity
    ours: Identity


class Receipts(Protocol):
    """Where the receipts answered for received messages are kept, by (AS2-From, AS2-To, Message-ID)."""

    sends: bool
    """True when `put` can also send a receipt to the sender's URL (an asynchronous MDN, through an outbox)."""

    async def get(self, key: tuple[str, str, str]) -> bytes | None:
        """The receipt stored for `key`, None when there is none; TransientError when the store failed."""

    async def put(self, key: tuple[str, str, str], receipt: bytes, *, send_to: str = "") -> bytes:
        """Store `receipt` for `key` unless one is stored already, and when it is the first and `send_to` is set,
        send it there after the commit; return the stored one (the first wins)."""


class _Memory:
    """Receipts in this process's memory: what a source without a store answers resends from (it sends none: an
    asynchronous MDN asked for is answered synchronously)."""

    sends = False

    def __init__(self) -> None:
        self.kept: dict[tuple[str, str, str], bytes] = {}

    async def get(self, key: tuple[str, str, str]) -> bytes | None:
        return self.kept.get(key)

    async def put(self, key: tuple[str, str, str], receipt: bytes, *, send_to: str = "") -> bytes:
        del send_to
        return self.kept.setdefault(key, receipt)


@dataclass(slots=True, eq=False)
class _Pending:
    """A received message waiting for its settlement, and the answer its request waits for."""

    request: mdn.Request
    loaded: _Loaded | None
    failure: As2Failure | None
    wants_receipt: bool
    send_to: str
    """The sender's URL for an asynchronous MDN (Receipt-Delivery-Option), empty for a synchronous one."""
    answered: asyncio.Future[bytes | None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


def _unquote(value: str) -> str:
    value = value.strip()
    return value[1:-1] if len(value) > 1 and value[0] == value[-1] == '"' else value


def _answer(blob: bytes | None) -> Answer:
    if blob is None:
        return Answer(503, (("Retry-After", _RETRY_AFTER),), b"not settled: send the message again later\r\n")
    if not blob:
        return Answer(200)
    headers, body = mdn.headers_of(blob)
    return Answer(200, tuple(headers), body)


class As2Source(Source):
    """Receives AS2 messages over HTTP; each is answered after its delivery is settled (see the module)."""

    takes_partners = True
    """`open_source` passes the hub's AS2 agreements (`partners`) and its receipt store (`receipts`)."""

    def __init__(
        self,
        url: str,
        *,
        host: str,
        port: int,
        path: str,
        partners: Iterable[Partner] = (),
        receipts: Receipts | None = None,
        wait: float = 60.0,
        max_body: int = 64 << 20,
        read_timeout: float = 60.0,
        max_waiting: int = 1000,
        reuse_port: bool = False,
    ) -> None:
        """Nothing listens until `open`; the partners' certificates and keys are read here."""
        self.url = url
        self.wait = wait
        self.max_waiting = max_waiting
        self._receipts: Receipts = receipts if receipts is not None else _Memory()
        self._partners: dict[tuple[str, str], _Loaded] = {}
        for p in partners:
            theirs = Identity(smime.load_certificate(p.certificate))
            self._partners[(p.name, p.hub)] = _Loaded(p, theirs, smime.load_identity(p.hub_certificate, p.key))
        self._queue: asyncio.Queue[Delivery] = asyncio.Queue()
        self._waiting: set[_Pending] = set()
        """The messages whose request waits for its answer."""
        self._listener = Listener(
            self._handle,
            host=host,
            port=port,
            path=path,
            max_body=max_body,
            read_timeout=read_timeout,
            reuse_port=reuse_port,
        )

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        consumer: str,
        partners: Iterable[Partner] = (),
        receipts: Receipts | None = None,
        **options: Any,
    ) -> As2Source:
        """Build a source from `as2://HOST:PORT/PATH[?wait=S&max_body=BYTES&read_timeout=S&max_waiting=N]`;
        unknown options are refused. `consumer` is not part of an AS2 address."""
        del consumer
        _, opts = split_url(url, schemes=("as2",), overrides=options)
        wait = opts.take("wait", positive_float, 60.0)
        max_body = opts.take("max_body", positive_int, 64 << 20)
        read_timeout = opts.take("read_timeout", positive_float, 60.0)
        max_waiting = opts.take("max_waiting", positive_int, 1000)
        reuse_port = opts.take("reuse_port", lambda _, v: str(v).lower() in ("1", "true", "yes"), False)
        opts.finish()
        parts = urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            raise ConfigurationError(f"source URL {url!r}: the port must be 0-65535") from None
        if not parts.hostname or port is None:
            raise ConfigurationError(f"source URL {url!r}: an AS2 source listens on as2://HOST:PORT/PATH")
        return cls(
            f"as2://{parts.hostname}:{port}{parts.path or '/'}",
            host=parts.hostname,
            port=port,
            path=parts.path or "/",
            partners=partners,
            receipts=receipts,
            wait=wait,
            max_body=max_body,
            read_timeout=read_timeout,
            max_waiting=max_waiting,
            reuse_port=reuse_port,
        )

    @property
    def port(self) -> int:
        """The port listened on (the one chosen when the URL said 0, once open)."""
        return self._listener.port

    async def open(self) -> None:
        """Listen; SourceError when the address cannot be bound."""
        try:
            await self._listener.start()
        except OSError as exc:
            raise SourceError(f"{self.url}: cannot listen: {exc}") from None

    async def receive(self, *, max_messages: int, timeout: float) -> Sequence[Delivery]:
        """The messages received (and waiting for their answer), up to `max_messages`."""
        try:
            first = await asyncio.wait_for(self._queue.get(), timeout) if timeout > 0 else self._queue.get_nowait()
        except (TimeoutError, asyncio.QueueEmpty):
            return []
        got = [first]
        while len(got) < max_messages and not self._queue.empty():
            got.append(self._queue.get_nowait())
        return got

    async def ack(self, delivery: Delivery) -> None:
        """Store the message's receipt (a positive MDN), then answer it."""
        pending: _Pending = delivery.handle
        ours = pending.loaded.ours if pending.loaded else None
        blob = mdn.answer(pending.request, ours=ours) if pending.wants_receipt else b""
        await self._settled(pending, blob)

    async def reject(self, delivery: Delivery, *, reason: str) -> str | None:
        """Store the message's negative MDN (with the disposition of its failure), then answer it."""
        pending: _Pending = delivery.handle
        modifier = pending.failure.disposition if pending.failure else smime.UNEXPECTED
        ours = pending.loaded.ours if pending.loaded else None
        blob = mdn.answer(pending.request, modifier=modifier, explanation=reason[:500], ours=ours)
        await self._settled(pending, blob if pending.wants_receipt else b"")
        return None

    async def nack(self, delivery: Delivery, *, delay: float | None = None) -> None:
        """Answer 503: the sender sends the message again later."""
        pending: _Pending = delivery.handle
        if not pending.answered.done():
            pending.answered.set_result(None)

    async def _settled(self, pending: _Pending, blob: bytes) -> None:
        key = (pending.request.sender, pending.request.receiver, pending.request.message_id)
        try:
            stored = await self._receipts.put(key, blob, send_to=pending.send_to)
        except TransientError as exc:
            if not pending.answered.done():
                pending.answered.set_result(None)
            raise SourceError(f"{self.url}: the receipt of {key[2]} was not stored: {exc}") from exc
        if not pending.answered.done():  # an asynchronous MDN goes through the store's outbox: the answer is empty
            pending.answered.set_result(b"" if pending.send_to else stored)

    async def aclose(self) -> None:
        """Stop listening; every message not settled yet is answered 503 (the sender resends it)."""
        for pending in self._waiting:
            if not pending.answered.done():
                pending.answered.set_result(None)
        await self._listener.stop()

    async def _handle(self, request: Request) -> Answer:
        """Answer one POST: from the stored receipt, or once its delivery is settled."""
        headers = request.headers
        sender, receiver = _unquote(headers.get("as2-from", "")), _unquote(headers.get("as2-to", ""))
        message_id = headers.get("message-id", "").strip()
        if not (sender and receiver and message_id) or len(message_id) > 998:
            return Answer(400, body=b"AS2-From, AS2-To and Message-ID are required\r\n")
        try:
            stored = await self._receipts.get((sender, receiver, message_id))
        except TransientError:
            return _answer(None)
        if stored is not None:
            return _answer(stored)
        if len(self._waiting) >= self.max_waiting:  # the consumer is behind: the sender resends later
            return _answer(None)
        pending, payload = self._unwrap(request, sender, receiver, message_id)
        reason = f"{pending.failure} ({pending.failure.disposition})" if pending.failure else ""
        delivery = Delivery(
            payload,
            message_id=message_id,
            coordinates=f"as2:{sender}>{receiver}/{message_id}",
            source=f"as2:{sender}>{receiver}",
            headers={"as2-from": sender, "as2-to": receiver},
            handle=pending,
            reason=reason,
        )
        self._waiting.add(pending)
        try:
            await self._queue.put(delivery)
            with contextlib.suppress(TimeoutError):
                return _answer(await asyncio.wait_for(asyncio.shield(pending.answered), self.wait))
            return _answer(None)
        finally:
            self._waiting.discard(pending)

    def _unwrap(self, request: Request, sender: str, receiver: str, message_id: str) -> tuple[_Pending, bytes]:
        """The pending message and its payload: unwrapped, or as received when it fails (with its failure)."""
        headers = request.headers
        loaded = self._partners.get((sender, receiver))
        wants = bool(headers.get("disposition-notification-to"))
        options = headers.get("disposition-notification-options", "")
        failure: As2Failure | None = None
        mic, payload = "", request.body
        if loaded is None:
            failure = As2Failure(smime.AUTHENTICATION_FAILED, f"unknown AS2 partner {sender} (to {receiver})")
        else:
            try:
                content_type = headers.get("content-type", "application/octet-stream")
                unwrapped = unwrap(content_type, request.body, ours=loaded.ours, partner=loaded.theirs)
                _check_security(loaded.partner, signed=unwrapped.signed, encrypted=unwrapped.encrypted)
                mic, payload = unwrapped.mic, unwrapped.payload
            except As2Failure as exc:
                failure = exc
            except (ValueError, TypeError, LookupError) as exc:
                failure = As2Failure(smime.UNEXPECTED, f"the message cannot be read: {type(exc).__name__}: {exc}")
        send_to = headers.get("receipt-delivery-option", "").strip()
        if not (self._receipts.sends and wants and send_to.startswith(("http://", "https://")) and len(send_to) < 1000):
            send_to = ""
        request_ = mdn.Request(message_id, sender, receiver, options, mic)
        return _Pending(request_, loaded, failure, wants, send_to), payload


def _check_security(partner: Partner, *, signed: bool, encrypted: bool) -> None:
    """As2Failure(insufficient-message-security) when a message carries less than its agreement requires."""
    if "signed" in partner.security and not signed:
        raise As2Failure(smime.INSUFFICIENT_SECURITY, f"the agreement with {partner.name} requires signed messages")
    if "encrypted" in partner.security and not encrypted:
        raise As2Failure(smime.INSUFFICIENT_SECURITY, f"the agreement with {partner.name} requires encrypted messages")


async def publish(url: str, messages: Sequence[tuple[str, bytes] | Outgoing]) -> None:
    """Send `messages` to the partner's AS2 endpoint `url` (see `_as2_send`), each settled by its MDN."""
    await publish_once(open_publisher(url), messages)


def open_publisher(url: str) -> Publisher:
    """The publisher of an `as2://` / `as2s://` partner, or of an `mdn+http(s)://` URL (a receipt to deliver)."""
    return MdnPublisher(url) if url.lower().startswith("mdn+") else As2Publisher(url)


SOURCE = As2Source
PUBLISHER = open_publisher


def sealed(payload: bytes, *, identity: Identity, certificate: Any, content_type: str = "application/edi-x12") -> bytes:
    """An AS2 message's body as a partner sends it: `payload` signed with the partner's `identity`
    (`load_identity`), then encrypted to the receiver's `certificate` (`load_certificate`)."""
    kind, body = signed(entity(content_type, payload), identity)
    return encrypt(f"Content-Type: {kind}\r\n\r\n".encode() + body, certificate)
