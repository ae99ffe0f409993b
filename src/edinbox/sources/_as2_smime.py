"""S/MIME for AS2 (RFC 4130 over CMS, RFC 5652): sign, verify, encrypt, decrypt, decompress, and the MIC.

pyca `cryptography` does the cryptography (RSA and ECDSA signatures, RSA key transport, AES) and decrypts CMS
EnvelopedData; `asn1crypto` reads the SignedData and CompressedData structures, for which `cryptography` has no
reader. Every failure of a partner's data is an `As2Failure` carrying the RFC 4130 disposition modifier (7.4.3) that
the negative MDN reports.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.ciphers import algorithms
from cryptography.hazmat.primitives.serialization import pkcs7

from edinbox._errors import ConfigurationError, PermanentError

try:
    from asn1crypto import cms
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ConfigurationError("AS2 needs cryptography and asn1crypto: pip install 'edinbox[as2]'") from exc

__all__ = [
    "AUTHENTICATION_FAILED",
    "DECRYPTION_FAILED",
    "INSUFFICIENT_SECURITY",
    "INTEGRITY_FAILED",
    "UNEXPECTED",
    "As2Failure",
    "Identity",
    "decompress",
    "decrypt",
    "encrypt",
    "load_certificate",
    "load_identity",
    "mic",
    "micalg",
    "sign",
    "verify",
    "verify_opaque",
]

# RFC 4130 7.4.3: the disposition modifiers of a failed message ("processed/error: <modifier>")
AUTHENTICATION_FAILED = "authentication-failed"
DECRYPTION_FAILED = "decryption-failed"
INSUFFICIENT_SECURITY = "insufficient-message-security"
INTEGRITY_FAILED = "integrity-check-failed"
UNEXPECTED = "unexpected-processing-error"

_DIGESTS: dict[str, type[hashes.HashAlgorithm]] = {
    "sha1": hashes.SHA1,
    "sha224": hashes.SHA224,
    "sha256": hashes.SHA256,
    "sha384": hashes.SHA384,
    "sha512": hashes.SHA512,
}
"""Digests by the name asn1crypto and hashlib give them; AS2 writes them "sha-256" or "sha256" (RFC 5751 3.4.3.2)."""


class As2Failure(PermanentError):
    """A partner's AS2 message that cannot be accepted: parked, and answered by a negative MDN with `disposition`."""

    def __init__(self, disposition: str, reason: str) -> None:
        """`disposition` is the RFC 4130 modifier, `reason` the one line operators read."""
        super().__init__(reason)
        self.disposition = disposition


@dataclass(frozen=True, slots=True)
class Identity:
    """A certificate and, for our own side, its private key (None for a partner)."""

    certificate: x509.Certificate
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | None = None


def load_certificate(path: str) -> x509.Certificate:
    """Read a PEM or DER certificate file; ConfigurationError when it is missing or not a certificate."""
    try:
        with open(path, "rb") as file:
            data = file.read()
        if b"-----BEGIN" in data:
            return x509.load_pem_x509_certificate(data)
        return x509.load_der_x509_certificate(data)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read the certificate {path}: {exc}") from None


def load_identity(certificate: str, key: str) -> Identity:
    """Our certificate and private key (PEM or DER, unencrypted), checked to belong together."""
    cert = load_certificate(certificate)
    try:
        with open(key, "rb") as file:
            data = file.read()
        loaded = (
            serialization.load_pem_private_key(data, None)
            if b"-----BEGIN" in data
            else serialization.load_der_private_key(data, None)
        )
    except (OSError, ValueError, TypeError) as exc:
        raise ConfigurationError(f"cannot read the private key {key}: {exc}") from None
    if not isinstance(loaded, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        raise ConfigurationError(f"the private key {key} must be RSA or EC, not {type(loaded).__name__}")
    der = serialization.Encoding.DER
    info = serialization.PublicFormat.SubjectPublicKeyInfo
    if loaded.public_key().public_bytes(der, info) != cert.public_key().public_bytes(der, info):
        raise ConfigurationError(f"the private key {key} does not belong to the certificate {certificate}")
    return Identity(cert, loaded)


def micalg(name: str) -> str:
    """The digest name hashlib knows for an AS2 `micalg` ("sha-256" -> "sha256"); As2Failure for another."""
    digest = name.strip().lower().replace("-", "")
    if digest not in _DIGESTS:
        raise As2Failure(UNEXPECTED, f"unsupported MIC algorithm {name[:40]!r}")
    return digest


def mic(data: bytes, digest: str) -> str:
    """The Received-Content-MIC of `data` (RFC 4130 7.3.1): base64 digest, then the algorithm as AS2 names it."""
    value = base64.b64encode(hashlib.new(digest, data).digest()).decode()
    return f"{value}, {digest.replace('sha', 'sha-')}"


def sign(content: bytes, identity: Identity, *, digest: str = "sha256") -> bytes:
    """A detached CMS signature (DER) of `content` exactly as given (binary: no line endings translated)."""
    if identity.key is None:
        raise ConfigurationError("signing needs a private key")
    options = [pkcs7.PKCS7Options.DetachedSignature, pkcs7.PKCS7Options.Binary]
    builder = pkcs7.PKCS7SignatureBuilder().set_data(content)
    chosen = _DIGESTS[digest]()
    if not isinstance(chosen, hashes.SHA224 | hashes.SHA256 | hashes.SHA384 | hashes.SHA512):
        raise ConfigurationError(f"receipts are signed with SHA-2, not {digest}")
    builder = builder.add_signer(identity.certificate, identity.key, chosen)
    return builder.sign(serialization.Encoding.DER, options)


def verify(content: bytes, signature: bytes, partner: x509.Certificate) -> str:
    """Check a detached CMS signature of `content` against the partner's certificate; return the signer's digest
    name. As2Failure(authentication-failed) when it is not the partner's, or does not match the content."""
    try:
        info = cms.ContentInfo.load(signature)
        signer = info["content"]["signer_infos"][0]
        digest = str(signer["digest_algorithm"]["algorithm"].native)
        attributes = signer["signed_attrs"]
        value = signer["signature"].native
        algorithm = signer["signature_algorithm"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise As2Failure(AUTHENTICATION_FAILED, f"the signature cannot be read: {exc}") from None
    if digest not in _DIGESTS:
        raise As2Failure(AUTHENTICATION_FAILED, f"unsupported signature digest {digest[:40]}")
    signed = content
    if attributes.native is not None:  # signed attributes: the content's digest is one of them (RFC 5652 5.4)
        found = [a["values"][0].native for a in attributes if a["type"].native == "message_digest"]
        if found != [hashlib.new(digest, content).digest()]:
            raise As2Failure(AUTHENTICATION_FAILED, "the signature does not match the content (message digest)")
        signed = b"\x31" + attributes.dump()[1:]  # the SET OF, not the [0] it is tagged with in SignerInfo
    try:
        _check(partner, value, signed, digest, algorithm)
    except InvalidSignature:
        raise As2Failure(AUTHENTICATION_FAILED, "the signature is not the partner's certificate's") from None
    return digest


def verify_opaque(data: bytes, partner: x509.Certificate) -> tuple[bytes, str]:
    """The content of CMS SignedData that carries it (opaque signing, smime-type=signed-data) once its signature is
    checked as `verify` checks a detached one; its content and the signer's digest name."""
    try:
        content = cms.ContentInfo.load(data)["content"]["encap_content_info"]["content"].native
    except (ValueError, KeyError, TypeError) as exc:
        raise As2Failure(AUTHENTICATION_FAILED, f"the signed data cannot be read: {exc}") from None
    if not isinstance(content, bytes):
        raise As2Failure(AUTHENTICATION_FAILED, "the signed data carries no content")
    return content, verify(content, data, partner)


def _check(partner: x509.Certificate, value: bytes, signed: bytes, digest: str, algorithm: object) -> None:
    """Verify one signature value with the partner's public key (RSA PKCS #1 v1.5 or PSS, ECDSA)."""
    key = partner.public_key()
    chosen = _DIGESTS[digest]()
    name = str(algorithm["algorithm"].native)  # type: ignore[index]
    if isinstance(key, rsa.RSAPublicKey):
        if name == "rsassa_pss":
            salt = algorithm["parameters"]["salt_length"].native  # type: ignore[index]
            key.verify(value, signed, padding.PSS(padding.MGF1(chosen), salt), chosen)
        else:
            key.verify(value, signed, padding.PKCS1v15(), chosen)
    elif isinstance(key, ec.EllipticCurvePublicKey):
        key.verify(value, signed, ec.ECDSA(chosen))
    else:
        raise As2Failure(AUTHENTICATION_FAILED, f"unsupported partner key {type(key).__name__}")


def encrypt(content: bytes, partner: x509.Certificate) -> bytes:
    """CMS EnvelopedData (DER) of `content` for the partner's certificate, with AES-256-CBC."""
    builder = pkcs7.PKCS7EnvelopeBuilder().set_data(content).add_recipient(partner)
    builder = builder.set_content_encryption_algorithm(algorithms.AES256)
    return builder.encrypt(serialization.Encoding.DER, [pkcs7.PKCS7Options.Binary])


def decrypt(data: bytes, identity: Identity) -> bytes:
    """The content of CMS EnvelopedData (DER) addressed to us; As2Failure(decryption-failed) when it cannot be."""
    if not isinstance(identity.key, rsa.RSAPrivateKey):
        raise As2Failure(DECRYPTION_FAILED, "decryption needs our RSA private key")
    try:
        return pkcs7.pkcs7_decrypt_der(data, identity.certificate, identity.key, [])
    except (ValueError, TypeError) as exc:
        raise As2Failure(DECRYPTION_FAILED, f"the payload cannot be decrypted: {str(exc)[:200]}") from None
    except Exception as exc:  # an unsupported cipher is cryptography's UnsupportedAlgorithm
        raise As2Failure(DECRYPTION_FAILED, f"the payload cannot be decrypted: {type(exc).__name__}") from None


def decompress(data: bytes) -> bytes:
    """The content of CMS CompressedData (zlib, RFC 3274); As2Failure(unexpected-processing-error) otherwise."""
    try:
        return bytes(cms.ContentInfo.load(data)["content"].decompressed)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise As2Failure(UNEXPECTED, f"the compressed payload cannot be read: {str(exc)[:200]}") from None
