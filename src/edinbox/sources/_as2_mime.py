"""The MIME of AS2 messages (RFC 4130 over RFC 1847 / 5751): unwrap a received message layer by layer, and build
signed and encrypted entities.

A received message is its HTTP Content-Type plus its body. Each layer is one of: enveloped data (decrypted),
compressed data (decompressed), `multipart/signed` (the signature checked against the exact bytes of the signed part,
which are also what the MIC is taken of), or the payload entity itself. What the agreement requires (signed,
encrypted) is checked once every layer is off.
"""

from __future__ import annotations

import base64
import binascii
import email.parser
import email.policy
import uuid
from dataclasses import dataclass
from email.message import EmailMessage

from edinbox.sources import _as2_smime as smime
from edinbox.sources._as2_smime import As2Failure, Identity

__all__ = ["Unwrapped", "entity", "parts", "signed", "split", "unwrap"]

_LAYERS = 4
"""Layers of S/MIME one message may have (sign, compress, encrypt, and one more): beyond it, a message is refused."""

_PARSER = email.parser.BytesParser(policy=email.policy.HTTP)


@dataclass(frozen=True, slots=True)
class Unwrapped:
    """What a received message carried: its payload, how it was protected, and the MIC to acknowledge it with."""

    payload: bytes
    signed: bool
    encrypted: bool
    compressed: bool
    mic: str
    """The Received-Content-MIC: of the signed part when signed, else of the payload entity (RFC 4130 7.3.1)."""
    content_type: str = ""
    """The payload entity's Content-Type."""


def split(data: bytes) -> tuple[EmailMessage, bytes]:
    """A MIME entity's headers (parsed) and its body (the bytes after the first empty line)."""
    for end in (b"\r\n\r\n", b"\n\n"):
        at = data.find(end)
        if at >= 0:
            head, body = data[: at + len(end)], data[at + len(end) :]
            break
    else:
        head, body = data, b""
    return _PARSER.parsebytes(head, headersonly=True), body


def _body(headers: EmailMessage, body: bytes) -> bytes:
    """The body with its Content-Transfer-Encoding undone (base64; binary, 8bit and 7bit are as they are)."""
    encoding = str(headers.get("Content-Transfer-Encoding", "binary")).strip().lower()
    if encoding == "base64":
        try:
            return base64.b64decode(body, validate=False)
        except binascii.Error as exc:
            raise As2Failure(smime.UNEXPECTED, f"a base64 body cannot be decoded: {exc}") from None
    return body


def parts(body: bytes, boundary: str) -> list[bytes]:
    """The parts of a multipart body, each exactly as sent between its delimiters (RFC 2046 5.1.1)."""
    delimiter = b"--" + boundary.encode("ascii", "replace")
    start = body.find(delimiter)
    if start < 0:
        raise As2Failure(smime.UNEXPECTED, "the multipart body has no boundary")
    parts = []
    position = body.find(b"\n", start) + 1
    while position > 0:
        end = body.find(b"\n" + delimiter, position)
        if end < 0:
            raise As2Failure(smime.UNEXPECTED, "the multipart body is not closed")
        parts.append(body[position : end - 1 if body[end - 1 : end] == b"\r" else end])
        after = end + 1 + len(delimiter)
        if body[after : after + 2] == b"--":
            return parts
        position = body.find(b"\n", after) + 1
    raise As2Failure(smime.UNEXPECTED, "the multipart body is cut short")


def unwrap(content_type: str, body: bytes, *, ours: Identity | None, partner: Identity | None) -> Unwrapped:
    """Undo every S/MIME layer of a received message (its HTTP Content-Type and body): As2Failure with the RFC 4130
    disposition when a layer cannot be undone."""
    data = f"Content-Type: {content_type}\r\n\r\n".encode() + body
    signed = encrypted = compressed = False
    mic = ""
    for _ in range(_LAYERS):
        headers, raw = split(data)
        kind = headers.get_content_type()
        smime_type = str(headers.get_param("smime-type", "")).lower()
        if kind in ("application/pkcs7-mime", "application/x-pkcs7-mime") and smime_type == "compressed-data":
            data, compressed = smime.decompress(_body(headers, raw)), True
        elif kind in ("application/pkcs7-mime", "application/x-pkcs7-mime") and smime_type == "signed-data":
            if partner is None:
                raise As2Failure(smime.AUTHENTICATION_FAILED, "a signed message from a sender with no certificate")
            data, digest = smime.verify_opaque(_body(headers, raw), partner.certificate)
            signed, mic = True, smime.mic(data, digest)
        elif kind in ("application/pkcs7-mime", "application/x-pkcs7-mime"):
            if ours is None:
                raise As2Failure(smime.DECRYPTION_FAILED, "an encrypted message where none is expected")
            data, encrypted = smime.decrypt(_body(headers, raw), ours), True
        elif kind == "multipart/signed":
            pieces = parts(raw, str(headers.get_param("boundary", "")))
            if len(pieces) != 2:
                raise As2Failure(smime.AUTHENTICATION_FAILED, "a signed message must have two parts")
            signature_headers, signature = split(pieces[1])
            if partner is None:
                raise As2Failure(smime.AUTHENTICATION_FAILED, "a signed message from a sender with no certificate")
            digest = smime.verify(pieces[0], _body(signature_headers, signature), partner.certificate)
            data, signed, mic = pieces[0], True, smime.mic(pieces[0], digest)
        else:
            payload, mic = _body(headers, raw), mic or smime.mic(data, "sha256")
            return Unwrapped(payload, signed, encrypted, compressed, mic, str(headers.get("Content-Type", "")))
    raise As2Failure(smime.UNEXPECTED, f"more than {_LAYERS} layers of S/MIME")


def entity(content_type: str, payload: bytes, **headers: str) -> bytes:
    """A MIME entity (headers, empty line, body as it is: binary) of `payload`."""
    lines = [f"Content-Type: {content_type}", "Content-Transfer-Encoding: binary"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


def signed(content: bytes, identity: Identity, *, digest: str = "sha256") -> tuple[str, bytes]:
    """`content` (a whole MIME entity) signed: the Content-Type of the `multipart/signed` body, and that body."""
    boundary = f"----=_edinbox_{uuid.uuid4().hex}"
    signature = base64.encodebytes(smime.sign(content, identity, digest=digest)).replace(b"\n", b"\r\n")
    body = b"".join(
        [
            f"--{boundary}\r\n".encode(),
            content,
            f"\r\n--{boundary}\r\n".encode(),
            b'Content-Type: application/pkcs7-signature; name="smime.p7s"\r\n',
            b"Content-Transfer-Encoding: base64\r\n",
            b'Content-Disposition: attachment; filename="smime.p7s"\r\n\r\n',
            signature,
            f"\r\n--{boundary}--\r\n".encode(),
        ]
    )
    micalg = digest.replace("sha", "sha-")
    return f'multipart/signed; protocol="application/pkcs7-signature"; micalg={micalg}; boundary="{boundary}"', body
