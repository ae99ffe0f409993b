"""AS2 receipts (MDN, RFC 4130 7.4 over RFC 3798): build one for a received message, read one for a sent message.

A receipt is kept and answered as one blob: its HTTP headers, an empty line, its body. The blob is what the hub
stores, so a resend of a message is answered with exactly the bytes the first answer had.
"""

from __future__ import annotations

import email.utils
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from edinbox.sources import _as2_mime as mime
from edinbox.sources import _as2_smime as smime
from edinbox.sources._as2_smime import As2Failure, Identity

__all__ = ["PROCESSED", "Request", "Verdict", "answer", "headers_of", "read", "requested_micalg"]

PROCESSED = "automatic-action/MDN-sent-automatically; processed"
"""The disposition of a message received and committed (RFC 4130 7.4.3)."""

_UA = "edinbox"


@dataclass(frozen=True, slots=True)
class Request:
    """What an MDN answers: the message's ids, whether and how the sender asked for a receipt, and its MIC."""

    message_id: str
    sender: str
    """AS2-From of the message (the MDN's AS2-To)."""
    receiver: str
    """AS2-To of the message (the MDN's AS2-From)."""
    options: str = ""
    """Disposition-Notification-Options: a signed receipt is asked for when it names pkcs7-signature."""
    mic: str = ""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a sent message's MDN said: whether it was processed, the modifier when not, and the MIC it reports."""

    processed: bool
    modifier: str
    mic: str
    original: str


def requested_micalg(options: str) -> str | None:
    """The digest of a signed receipt the Disposition-Notification-Options ask for (None: an unsigned one)."""
    lowered = options.lower()
    if "pkcs7-signature" not in lowered:
        return None
    for clause in lowered.split(";"):
        name, _, values = clause.partition("=")
        if name.strip() == "signed-receipt-micalg":
            for value in values.split(",")[1:]:
                try:
                    digest = smime.micalg(value)
                except As2Failure:
                    continue
                if digest != "sha1":  # receipts are signed with SHA-2 (the first the sender accepts)
                    return digest
    return "sha256"


def answer(request: Request, *, modifier: str = "", explanation: str = "", ours: Identity | None) -> bytes:
    """The MDN of `request` as a blob: "processed" without `modifier`, else "processed/error: <modifier>"; signed
    with `ours` when the sender asked for a signed receipt and we have a key for it."""
    disposition = f"{PROCESSED}/error: {modifier}" if modifier else PROCESSED
    text = explanation or (
        "The message was received and committed." if not modifier else f"The message was not accepted: {modifier}."
    )
    report = [
        f"Reporting-UA: {_UA}",
        f"Original-Recipient: rfc822; {request.receiver}",
        f"Final-Recipient: rfc822; {request.receiver}",
        f"Original-Message-ID: {request.message_id}",
        f"Disposition: {disposition}",
    ]
    if request.mic and not modifier:
        report.append(f"Received-Content-MIC: {request.mic}")
    boundary = f"----=_edinbox_report_{uuid.uuid4().hex}"
    body = b"".join(
        [
            f"--{boundary}\r\n".encode(),
            mime.entity("text/plain; charset=us-ascii", f"{text}\r\n".encode("ascii", "replace")),
            f"\r\n--{boundary}\r\n".encode(),
            mime.entity("message/disposition-notification", ("\r\n".join(report) + "\r\n").encode()),
            f"\r\n--{boundary}--\r\n".encode(),
        ]
    )
    content_type = f'multipart/report; report-type=disposition-notification; boundary="{boundary}"'
    digest = requested_micalg(request.options)
    if digest is not None and ours is not None and ours.key is not None:
        content_type, body = mime.signed(mime.entity(content_type, body), ours, digest=digest)
    head = [
        ("AS2-Version", "1.2"),
        ("AS2-From", _quoted(request.receiver)),
        ("AS2-To", _quoted(request.sender)),
        ("Message-ID", f"<{uuid.uuid4().hex}@edinbox>"),
        ("Date", email.utils.formatdate(usegmt=True)),
        ("MIME-Version", "1.0"),
        ("Content-Type", content_type),
    ]
    return ("\r\n".join(f"{k}: {v}" for k, v in head) + "\r\n\r\n").encode() + body


def _quoted(name: str) -> str:
    """An AS2 name as a header value: quoted when it has a space (RFC 4130 6.2)."""
    return f'"{name}"' if " " in name else name


def headers_of(blob: bytes) -> tuple[list[tuple[str, str]], bytes]:
    """A receipt blob's HTTP headers (in order) and body."""
    head, _, body = blob.partition(b"\r\n\r\n")
    pairs = []
    for line in head.decode("latin-1").split("\r\n"):
        name, _, value = line.partition(":")
        pairs.append((name.strip(), value.strip()))
    return pairs, body


def read(headers: Mapping[str, str], body: bytes, *, partner: Identity | None) -> Verdict:
    """What an MDN received for a sent message says, its signature checked against `partner` when it is signed;
    As2Failure when the check fails or when it is not an MDN."""
    unwrapped = mime.unwrap(headers.get("content-type", ""), body, ours=None, partner=partner)
    report, _ = mime.split(f"Content-Type: {unwrapped.content_type}\r\n\r\n".encode())
    fields: dict[str, str] = {}
    for piece in mime.parts(unwrapped.payload, str(report.get_param("boundary", ""))):
        part_headers, part_body = mime.split(piece)
        if part_headers.get_content_type() == "message/disposition-notification":
            for line in part_body.decode("latin-1").splitlines():
                name, _, value = line.partition(":")
                fields[name.strip().lower()] = value.strip()
    disposition = fields.get("disposition", "")
    if not disposition:
        raise As2Failure(smime.UNEXPECTED, "the answer is not an MDN: it has no Disposition")
    modifier = disposition.partition("/error:")[2].strip()
    processed = not modifier and disposition.rstrip().endswith("processed")
    return Verdict(processed, modifier, fields.get("received-content-mic", ""), fields.get("original-message-id", ""))
