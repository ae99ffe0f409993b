"""AS2 outbound: what the hub sends to an `as2://` partner goes signed and encrypted, readable by the `openssl cms`
command (the partner here), and is settled by the partner's signed MDN with the MIC of what was sent; an MDN with
another MIC, a negative MDN, or none at all parks the outbox row with its reason."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from edinbox import edi
from edinbox._errors import PermanentError
from edinbox.hub import HubConfig
from edinbox.hub.config._model import Agreement
from edinbox.hub.demo._traffic import render
from edinbox.sources.as2 import publish
from edinbox.sources.spool import publish as drop
from hub_ops import stats

from .test_acknowledgments import settle
from .test_as2 import Certs, certs, openssl, split
from .test_hub import X12, doc

__all__ = ["certs"]


@dataclass
class Peer:
    """A partner's AS2 endpoint: decrypts and verifies with `openssl cms`, answers an MDN as `mode` says."""

    certs: Certs
    mode: str = "good"
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    port: int = 0

    def mdn(self, headers: dict[str, str], mic: str, disposition: str) -> tuple[str, bytes]:
        """A signed MDN made by openssl: (Content-Type, body)."""
        report = (
            "Content-Type: multipart/report; report-type=disposition-notification; boundary=b1\r\n\r\n"
            "--b1\r\nContent-Type: text/plain\r\n\r\nreceived\r\n"
            "--b1\r\nContent-Type: message/disposition-notification\r\n\r\n"
            f"Original-Message-ID: {headers['message-id']}\r\nDisposition: automatic-action/"
            f"MDN-sent-automatically; {disposition}\r\nReceived-Content-MIC: {mic}\r\n"
            "--b1--\r\n"
        ).encode()
        args = ["-sign", "-signer", str(self.certs.cert("partner")), "-inkey", str(self.certs.key("partner"))]
        return split(openssl(*args, "-md", "sha256", "-binary", "-crlfeol", data=report))

    def answer(self, headers: dict[str, str], body: bytes) -> tuple[str, bytes] | None:
        """Read a message as the partner does; the MDN to answer (None: none)."""
        partner = ["-recip", str(self.certs.cert("partner")), "-inkey", str(self.certs.key("partner"))]
        signed = openssl("-decrypt", "-inform", "DER", "-binary", *partner, data=body)
        openssl("-verify", "-CAfile", str(self.certs.cert("hub")), "-out", "/dev/null", data=signed)
        boundary = b"--" + signed.split(b'boundary="', 1)[1].split(b'"', 1)[0]
        content = signed.split(boundary + b"\r\n", 1)[1].split(b"\r\n" + boundary, 1)[0]  # the part signed
        self.received.append((headers, content.partition(b"\r\n\r\n")[2]))
        mic = base64.b64encode(hashlib.sha256(content).digest()).decode() + ", sha-256"
        if self.mode == "none":
            return None
        if self.mode == "wrong-mic-for-ta1" and b"TA1*" in content:
            mic = base64.b64encode(hashlib.sha256(b"other").digest()).decode() + ", sha-256"
        disposition = "processed/error: decryption-failed" if self.mode == "error" else "processed"
        return self.mdn(headers, mic, disposition)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One request per connection: read it, answer it, close."""
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")[1:]
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines if line)}
        body = await reader.readexactly(int(headers["content-length"]))
        mdn = await asyncio.to_thread(self.answer, headers, body)
        content_type, data = mdn if mdn else ("text/plain", b"")
        writer.write(
            f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {len(data)}\r\n"
            "Connection: close\r\n\r\n".encode()
            + data
        )
        await writer.drain()
        writer.close()

    def url(self, **options: str) -> str:
        """The destination URL of this partner."""
        query = {
            "from": "HUBAS2",
            "to": "ACME AS2",
            "certificate": str(self.certs.cert("partner")),
            "key": str(self.certs.key("hub")),
            "hub_certificate": str(self.certs.cert("hub")),
            **options,
        }
        return f"as2://127.0.0.1:{self.port}/as2?{urllib.parse.urlencode(query)}"


@pytest.fixture
async def peer(certs: Certs) -> AsyncIterator[Peer]:
    """A partner's AS2 endpoint on a free port."""
    found = Peer(certs)
    server = await asyncio.start_server(found.serve, "127.0.0.1", 0)
    found.port = server.sockets[0].getsockname()[1]
    async with server:
        yield found


@pytest.mark.parametrize("hub_config", ["sqlite"], indirect=True)
async def test_acknowledgments_go_signed_and_encrypted_and_are_settled_by_the_mdn(
    hub_config: HubConfig, peer: Peer, tmp_path: Path
) -> None:
    """An 810 gets its 997 over AS2, another asking for a TA1 its TA1 and 997 in one interchange: `openssl cms`
    decrypts and verifies each, the partner's MDN with the 997's MIC settles its outbox row; the MDN of the one
    holding the TA1 reports another MIC: its row is parked."""
    config = hub_config.with_overrides(partners={f"{X12.qualifier}:{X12.id}": Agreement(outbound=peer.url())})
    peer.mode = "wrong-mic-for-ta1"
    asked = replace(doc(control="000000601", number="OUT-1"), ack_requested=True)
    plain = doc(control="000000602", number="OUT-2")
    await drop(config.source, [("a", render(asked)), ("b", render(plain))])
    totals = await settle(config)
    assert (totals["relayed"], totals["outbox_parked"]) == (1, 1)
    replies = [i for _, payload in peer.received for i in edi.parse(payload)]
    assert {r.message_types for r in replies} == {("997",), ("TA1", "997")}
    assert all(h["as2-from"] == "HUBAS2" and h["as2-to"] == '"ACME AS2"' for h, _ in peer.received)
    counts = await stats(config)
    assert (counts["outbox"]["sent"], counts["outbox"]["parked"]) == (1, 1)


async def test_a_negative_mdn_or_none_is_a_permanent_failure(peer: Peer) -> None:
    """A partner answering "processed/error" fails the send for good at once; one answering without an MDN is tried
    `attempts` times, then fails for good with the reason."""
    peer.mode = "error"
    with pytest.raises(PermanentError, match="processed/error: decryption-failed"):
        await publish(peer.url(), [("k1", b"ISA*payload")])
    peer.mode = "none"
    with pytest.raises(PermanentError, match="no MDN within 5 s after 2 attempts"):
        await publish(peer.url(attempts="2", wait="5"), [("k2", b"ISA*payload")])
    assert len(peer.received) == 3
    assert peer.received[1][0]["message-id"] == peer.received[2][0]["message-id"]
