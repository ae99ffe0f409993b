"""`edinbox chaos --source as2://...`: the partner side of an AS2 chaos run.

AS2 is pushed, not published: the hubs listen (all on the one port, `reuse_port`: the kernel spreads connections
over them, as behind a load balancer), and a partner thread sends every interchange, signed with its key and
encrypted for the hub's certificate, until it has an MDN for it, resending after every dropped connection or 503
(a hub killed under the request, a commit not made in time). The redeliveries chaos adds are resends of messages
already sent, under their first Message-ID: each must be answered with the stored receipt and create nothing.
The certificates (self-signed, RSA 2048, valid a day) are made for the run in its work folder.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from edinbox.hub.config import Agreement, HubConfig

__all__ = ["Partner", "agreed"]

_PARTNER, _HUB = "CHAOS PARTNER", "CHAOS HUB"
_WAIT = 0.2
"""Seconds between two tries of one message."""


def _identity(folder: Path, name: str) -> tuple[str, str]:
    """A fresh self-signed RSA certificate and its key as PEM files in `folder`: (certificate, key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"edinbox chaos {name}")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / f"{name}.pem", folder / f"{name}.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    key_path.write_bytes(pem)
    key_path.chmod(0o600)
    return str(cert_path), str(key_path)


def agreed(config: HubConfig, workdir: Path) -> tuple[HubConfig, Path]:
    """`config` with certificates made in `workdir`, an AS2 agreement with the chaos partner for every sender
    (`"*"`), and the listening address shared by every hub (`reuse_port=1`); and the settings file that gives the
    hubs that agreement."""
    hub_cert, hub_key = _identity(workdir, "hub")
    partner_cert, _ = _identity(workdir, "partner")
    agreement = Agreement(
        as2_id=_PARTNER,
        as2_hub_id=_HUB,
        as2_certificate=partner_cert,
        as2_key=hub_key,
        as2_hub_certificate=hub_cert,
    )
    joiner = "&" if "?" in config.source else "?"
    settings = workdir / "partners.toml"
    terms = "".join(f'{name} = "{value}"\n' for name, value in dataclasses.asdict(agreement).items() if value)
    settings.write_text(f'[partners."*"]\n{terms}')
    source = f"{config.source}{joiner}reuse_port=1"
    return config.with_overrides(source=source, partners={"*": agreement}), settings


@dataclass
class Partner:
    """Sends interchanges to the hubs over AS2 in a thread of its own, each until it has its MDN."""

    config: HubConfig
    workdir: Path
    deadline: float
    answered: int = 0
    tries: int = 0
    negative: int = 0
    failed: list[str] = field(default_factory=list)
    _thread: threading.Thread | None = None

    def start(self, first: Sequence[tuple[str, bytes]], resends: Sequence[tuple[str, bytes]]) -> None:
        """Send `first`, then resend `resends` (files of `first`) under their first Message-IDs."""
        self._thread = threading.Thread(target=lambda: asyncio.run(self._send(first, resends)), daemon=True)
        self._thread.start()

    def join(self) -> None:
        """Wait for the thread (bounded by the deadline)."""
        if self._thread is not None:
            self._thread.join(max(0.0, self.deadline - time.monotonic()) + 5.0)

    async def _send(self, first: Sequence[tuple[str, bytes]], resends: Sequence[tuple[str, bytes]]) -> None:
        import httpx

        from edinbox.sources.as2 import load_certificate, load_identity, sealed

        ours = load_identity(str(self.workdir / "partner.pem"), str(self.workdir / "partner.key"))
        hub = load_certificate(str(self.workdir / "hub.pem"))
        address = self.config.source.replace("as2://", "http://", 1).split("?", 1)[0]
        ids = {name: f"<chaos-{n}@partner>" for n, (name, _) in enumerate(first)}
        async with httpx.AsyncClient(timeout=60.0) as client:
            for name, payload in [*first, *resends]:
                headers = {
                    "AS2-From": f'"{_PARTNER}"',
                    "AS2-To": f'"{_HUB}"',
                    "Message-ID": ids[name],
                    "Content-Type": 'application/pkcs7-mime; smime-type=enveloped-data; name="smime.p7m"',
                    "Disposition-Notification-To": "chaos@partner",
                    "Disposition-Notification-Options": "signed-receipt-protocol=optional, pkcs7-signature",
                }
                await self._until_answered(
                    client, address, headers, sealed(payload, identity=ours, certificate=hub), name
                )

    async def _until_answered(
        self, client: object, address: str, headers: dict[str, str], body: bytes, name: str
    ) -> None:
        """POST until a hub answers 200 with an MDN; a dropped connection or 503 is tried again."""
        import httpx

        while time.monotonic() < self.deadline:
            self.tries += 1
            try:
                answer = await client.post(address, content=body, headers=headers)  # type: ignore[attr-defined]
            except httpx.HTTPError:
                await asyncio.sleep(_WAIT)
                continue
            if answer.status_code == 200 and b"Disposition:" in answer.content:
                self.answered += 1
                self.negative += b"processed/error" in answer.content
                return
            await asyncio.sleep(_WAIT)
        self.failed.append(name)
