"""AS2 inbound: messages made by the `openssl cms` command (signed, encrypted, both, neither) are verified, decrypted,
journaled and answered after the commit with a signed MDN that `openssl cms -verify` accepts, carrying the MIC of
what was received; a resend of a Message-ID gets the first receipt back byte for byte and creates nothing; a message
from an unknown partner, with a bad signature, or that cannot be decrypted gets a negative MDN and is parked alone."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from edinbox.hub import HubConfig, open_hub
from edinbox.hub.config._model import Agreement
from edinbox.hub.database._journal import open_inbox
from edinbox.hub.database._purge import purge_rejected
from edinbox.hub.demo._traffic import render
from edinbox.hub.partners._as2 import Receipts
from edinbox.sources.as2 import As2Source
from hub_ops import init, stats
from servers import free_port

from .test_hub import EDIFACT, X12, doc

SQLITE = pytest.mark.parametrize("hub_config", ["sqlite"], indirect=True)
"""Where the database plays no part beyond holding the rows (the receipts' SQL is run on every dialect by the resend
test)."""

PARTNER, STRICT, HUB = "ACME AS2", "STRICT AS2", "HUBAS2"


@dataclass(frozen=True)
class Certs:
    """Test certificates made by openssl: ours, the partner's, and a stranger's (to sign or encrypt wrongly)."""

    folder: Path

    def cert(self, who: str) -> Path:
        return self.folder / f"{who}.pem"

    def key(self, who: str) -> Path:
        return self.folder / f"{who}.key"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """Self-signed RSA test certificates, made for this run only (never committed)."""
    folder = tmp_path_factory.mktemp("as2certs")
    for who in ("hub", "partner", "stranger"):
        key, cert = str(folder / f"{who}.key"), str(folder / f"{who}.pem")
        args = ["-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN=test {who}"]
        subprocess.run(["openssl", "req", *args, "-keyout", key, "-out", cert], check=True, capture_output=True)
    return Certs(folder)


def openssl(*args: str, data: bytes) -> bytes:
    """Run `openssl cms` on `data`; its output."""
    done = subprocess.run(["openssl", "cms", *args], input=data, check=True, capture_output=True)
    return done.stdout


def entity(payload: bytes) -> bytes:
    """The payload as the MIME entity a partner signs or encrypts."""
    return b"Content-Type: application/edi-x12\r\nContent-Transfer-Encoding: binary\r\n\r\n" + payload


def split(smime: bytes) -> tuple[str, bytes]:
    """openssl's S/MIME output as (Content-Type, body): its headers go into the HTTP request's."""
    head, _, body = smime.partition(b"\r\n\r\n")
    unfolded = head.decode().replace("\r\n ", " ").replace("\r\n\t", " ")
    lines = unfolded.split("\r\n")
    return next(line.split(":", 1)[1].strip() for line in lines if line.lower().startswith("content-type")), body


def signed(certs: Certs, data: bytes, *, signer: str = "partner") -> bytes:
    """`data` (a MIME entity) signed by openssl as multipart/signed, with its headers."""
    args = ["-sign", "-signer", str(certs.cert(signer)), "-inkey", str(certs.key(signer)), "-md", "sha256"]
    return openssl(*args, "-binary", "-crlfeol", data=data)


def encrypted(certs: Certs, data: bytes, *, to: str = "hub") -> tuple[str, bytes]:
    """`data` (a MIME entity) encrypted by openssl with AES-256 for `to`: (Content-Type, DER body)."""
    body = openssl("-encrypt", "-aes256", "-binary", "-outform", "DER", str(certs.cert(to)), data=data)
    return 'application/pkcs7-mime; smime-type=enveloped-data; name="smime.p7m"', body


def message(certs: Certs, payload: bytes, how: str, **kwargs: str) -> tuple[str, bytes]:
    """A message as a partner sends it: "plain", "signed", "opaque" (signed-data), "encrypted" or "both" (signed,
    then encrypted)."""
    inner = entity(payload)
    if how == "plain":
        return "application/edi-x12", payload
    if how == "signed":
        return split(signed(certs, inner, **kwargs))
    if how == "encrypted":
        return encrypted(certs, inner, **kwargs)
    if how == "opaque":  # signed, the content inside the signature (smime-type=signed-data)
        args = ["-sign", "-nodetach", "-signer", str(certs.cert("partner")), "-inkey", str(certs.key("partner"))]
        body = openssl(*args, "-md", "sha256", "-binary", "-outform", "DER", data=inner)
        return "application/pkcs7-mime; smime-type=signed-data", body
    return encrypted(certs, signed(certs, inner))


async def post(
    port: int, message_id: str, message: tuple[str, bytes], *, sender: str = PARTNER, **more: str
) -> httpx.Response:
    """POST one AS2 message asking for a signed receipt (and `more` headers); the answer."""
    headers = {
        **more,
        "AS2-Version": "1.2",
        "AS2-From": f'"{sender}"',
        "AS2-To": HUB,
        "Message-ID": message_id,
        "Content-Type": message[0],
        "Disposition-Notification-To": "edi@partner.example",
        "Disposition-Notification-Options": (
            "signed-receipt-protocol=optional, pkcs7-signature; signed-receipt-micalg=optional, sha-256"
        ),
    }
    async with httpx.AsyncClient(timeout=30) as client:
        return await client.post(f"http://127.0.0.1:{port}/as2", content=message[1], headers=headers)


def verified(certs: Certs, answer: httpx.Response) -> str:
    """The MDN report of an answer, its signature verified by `openssl cms -verify` against our certificate."""
    assert answer.status_code == 200, answer.text
    smime = f"Content-Type: {answer.headers['content-type']}\r\n\r\n".encode() + answer.content
    return openssl("-verify", "-CAfile", str(certs.cert("hub")), data=smime).decode()


def mic(data: bytes) -> str:
    """The Received-Content-MIC of `data`, computed here."""
    return base64.b64encode(hashlib.sha256(data).digest()).decode() + ", sha-256"


@pytest.fixture
async def hub(hub_config: HubConfig, certs: Certs, tmp_path: Path) -> AsyncIterator[tuple[HubConfig, int]]:
    """A hub listening for AS2 on a free port, with an agreement with PARTNER (no security required, so every kind
    of message is taken) and one with STRICT (signed and encrypted required); its config and port."""
    agreement = Agreement(
        as2_id=PARTNER,
        as2_hub_id=HUB,
        as2_certificate=str(certs.cert("partner")),
        as2_key=str(certs.key("hub")),
        as2_hub_certificate=str(certs.cert("hub")),
        as2_security="none",
    )
    strict = dataclasses.replace(agreement, as2_id=STRICT, as2_security="signed+encrypted")
    partners = {f"{X12.qualifier}:{X12.id}": agreement, f"{EDIFACT.qualifier}:{EDIFACT.id}": strict}
    config = hub_config.with_overrides(source=f"as2://127.0.0.1:{free_port()}/as2?wait=20", partners=partners)
    await init(config)
    async with open_hub(config) as running:
        assert isinstance(running.source, As2Source)
        task = asyncio.ensure_future(running.run())
        try:
            yield config, running.source.port
        finally:
            running.stop.set()
            await task


@SQLITE
async def test_openssl_messages_are_verified_decrypted_journaled_and_acknowledged(
    hub: tuple[HubConfig, int], certs: Certs
) -> None:
    """A plain, a signed (detached and opaque), an encrypted and a signed-then-encrypted 810 made by `openssl cms` are
    each booked once and answered with an MDN "processed" that `openssl cms -verify` accepts, with the MIC of the
    signed part (or of the payload entity when unsigned)."""
    config, port = hub
    sent = {}
    for n, how in enumerate(("plain", "signed", "opaque", "encrypted", "both")):
        payload = render(doc(control=f"00000090{n}", number=f"AS2-{n}"))
        sent[how] = (payload, await post(port, f"<m{n}@partner>", message(certs, payload, how)))
    for how, (payload, answer) in sent.items():
        report = verified(certs, answer)
        assert "Disposition: automatic-action/MDN-sent-automatically; processed\r\n" in report, how
        assert f"Original-Message-ID: <m{list(sent).index(how)}@partner>" in report
        if how in ("signed", "opaque"):  # the MIC is of the signed entity, exactly as the partner signed it
            assert f"Received-Content-MIC: {mic(entity(payload))}" in report
    counts = await stats(config)
    assert (counts["invoices"], counts["processed"], counts["rejected"]) == (5, 5, 0)


@pytest.mark.parametrize("hub_config", ["sqlite", "postgresql", "mysql"], indirect=True)
async def test_a_resend_gets_the_first_receipt_and_creates_nothing(hub: tuple[HubConfig, int], certs: Certs) -> None:
    """The same Message-ID sent again, as the same bytes and re-signed by openssl, is answered with the first
    receipt byte for byte (headers and body), and nothing more is journaled or booked; the purge deletes the
    receipt once it is older than the retention."""
    config, port = hub
    payload = render(doc(control="000000950", number="AS2-R"))
    first_message = message(certs, payload, "signed")
    first = await post(port, "<resend@partner>", first_message)
    again = await post(port, "<resend@partner>", first_message)
    resigned_message = message(certs, payload, "signed")
    assert resigned_message != first_message  # a new signature (its time and boundary differ)
    resigned = await post(port, "<resend@partner>", resigned_message)
    verified(certs, first)
    for answer in (again, resigned):
        assert answer.content == first.content
        assert answer.headers.raw == first.headers.raw
    counts = await stats(config)
    assert (counts["invoices"], counts["received"], counts["journal_rows"]) == (1, 1, 1)
    async with open_inbox(config) as inbox:  # the purge takes receipts older than the retention with it
        receipts = Receipts(inbox, consumer=config.consumer)
        assert await receipts.get((PARTNER, HUB, "<resend@partner>")) is not None
        await asyncio.sleep(0.01)
        await purge_rejected(inbox, consumer=config.consumer, older_than=timedelta(microseconds=1))
        assert await receipts.get((PARTNER, HUB, "<resend@partner>")) is None


@SQLITE
async def test_an_asynchronous_mdn_goes_to_the_partners_url_after_the_commit(
    hub: tuple[HubConfig, int], certs: Certs
) -> None:
    """A message asking for its MDN at a URL (Receipt-Delivery-Option) is answered 200 with no body after the commit;
    the outbox then POSTs the signed MDN there, which `openssl cms -verify` accepts, with the MIC of what was sent."""
    config, port = hub
    delivered: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue()

    async def receive(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head.split("\r\n"))}
        await delivered.put((fields["content-type"], await reader.readexactly(int(fields["content-length"]))))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(receive, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mdn"
    payload = render(doc(control="000000960", number="ASYNC-1"))
    async with server:
        answer = await post(
            port, "<async@partner>", message(certs, payload, "signed"), **{"Receipt-Delivery-Option": url}
        )
        assert (answer.status_code, answer.content) == (200, b"")
        content_type, body = await asyncio.wait_for(delivered.get(), 60)
    smime = f"Content-Type: {content_type}\r\n\r\n".encode() + body
    report = openssl("-verify", "-CAfile", str(certs.cert("hub")), data=smime).decode()
    assert "; processed\r\n" in report
    assert f"Received-Content-MIC: {mic(entity(payload))}" in report
    assert (await stats(config))["invoices"] == 1


@SQLITE
async def test_bad_messages_get_negative_mdns_and_are_parked_alone(hub: tuple[HubConfig, int], certs: Certs) -> None:
    """Sent at once among good messages: one from an unknown AS2 partner, one signed by a stranger's key, one
    encrypted for a stranger and one only signed where the agreement requires encryption each get a signed (or, for
    the unknown partner, unsigned) negative MDN with the RFC 4130 disposition and are parked; the good ones are
    booked."""
    config, port = hub
    good = [render(doc(control=f"00000097{n}", number=f"G-{n}")) for n in range(2)]
    bad = render(doc(control="000000979", number="BAD"))
    answers = await asyncio.gather(
        post(port, "<g0@partner>", message(certs, good[0], "both")),
        post(port, "<u@other>", message(certs, bad, "plain"), sender="OTHER AS2"),
        post(port, "<s@partner>", message(certs, bad, "signed", signer="stranger")),
        post(port, "<e@partner>", message(certs, bad, "encrypted", to="stranger")),
        post(port, "<g1@partner>", message(certs, good[1], "signed")),
        post(port, "<w@strict>", message(certs, bad, "signed"), sender=STRICT),
    )
    assert "; processed\r\n" in verified(certs, answers[0])
    assert "; processed\r\n" in verified(certs, answers[4])
    assert "processed/error: authentication-failed" in answers[1].text  # unsigned: no agreement to sign it under
    assert "processed/error: authentication-failed" in verified(certs, answers[2])
    assert "processed/error: decryption-failed" in verified(certs, answers[3])
    assert "processed/error: insufficient-message-security" in verified(certs, answers[5])
    counts = await stats(config)
    assert (counts["invoices"], counts["processed"], counts["rejected"]) == (2, 2, 4)


@SQLITE
async def test_a_message_never_committed_is_processed_on_resend(
    hub_config: HubConfig, certs: Certs, tmp_path: Path
) -> None:
    """A message received by a source that closed before settling it (a process that died before its commit) is
    answered 503 with no receipt; its resend to the hub is processed, once."""
    agreement = Agreement(
        as2_id=PARTNER,
        as2_hub_id=HUB,
        as2_certificate=str(certs.cert("partner")),
        as2_key=str(certs.key("hub")),
        as2_hub_certificate=str(certs.cert("hub")),
    )
    partners = {f"{X12.qualifier}:{X12.id}": agreement}
    config = hub_config.with_overrides(source=f"as2://127.0.0.1:{free_port()}/as2", partners=partners)
    await init(config)
    payload = message(certs, render(doc(control="000000990", number="K-1")), "both")
    async with open_hub(config) as first:
        port = first.source.port  # type: ignore[attr-defined]
        sending = asyncio.ensure_future(post(port, "<k@partner>", payload))
        received = await first.source.receive(max_messages=1, timeout=10)
        assert len(received) == 1  # received, never settled: the source closes under it
    assert (await sending).status_code == 503
    async with open_hub(config) as second:
        task = asyncio.ensure_future(second.run())
        answer = await post(second.source.port, "<k@partner>", payload)  # type: ignore[attr-defined]
        second.stop.set()
        await task
    assert "; processed\r\n" in verified(certs, answer)
    counts = await stats(config)
    assert (counts["invoices"], counts["processed"], counts["journal_rows"]) == (1, 1, 1)


def settings(config: HubConfig, certs: Certs, folder: Path) -> Path:
    """A settings file for `edinbox run` with the hub's database, the AS2 source and PARTNER's agreement."""
    path = folder / "hub.toml"
    path.write_text(
        f'[hub]\ndb = "{config.db}"\nsource = "{config.source}"\n\n[partners."{X12.qualifier}:{X12.id}"]\n'
        f'as2_id = "{PARTNER}"\nas2_hub_id = "{HUB}"\nas2_certificate = "{certs.cert("partner")}"\n'
        f'as2_key = "{certs.key("hub")}"\nas2_hub_certificate = "{certs.cert("hub")}"\n'
    )
    return path


async def listening(port: int, process: subprocess.Popen[bytes]) -> None:
    """Wait until `edinbox run` listens on `port`."""
    for _ in range(600):
        assert process.poll() is None, "edinbox run ended"
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        writer.close()
        return
    raise AssertionError("edinbox run never listened")


@SQLITE
async def test_a_hub_killed_between_commit_and_receipt_answers_the_resend_once(
    hub_config: HubConfig, certs: Certs, tmp_path: Path
) -> None:
    """`edinbox run` killed (SIGKILL) right after committing a message, before its receipt was stored or sent: the
    partner's resend to the restarted hub is answered with a signed MDN "processed", and the invoice exists once;
    SIGTERM then stops the hub."""
    config = hub_config.with_overrides(source=f"as2://127.0.0.1:{free_port()}/as2")
    path = settings(config, certs, tmp_path)
    port = int(config.source.split(":")[2].split("/")[0])
    payload = message(certs, render(doc(control="000000995", number="KILL-1")), "both")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")}
    command = [sys.executable, "-m", "edinbox", "run", "--config", str(path), "--no-relay"]
    killed = subprocess.Popen(command, env={**env, "EDINBOX_FAULT": "after_commit:1"})  # noqa: ASYNC220 - not awaited
    await listening(port, killed)
    with pytest.raises(httpx.HTTPError):  # the connection drops with the process: no answer, no receipt
        await post(port, "<kill@partner>", payload)
    assert killed.wait(timeout=30) == -signal.SIGKILL
    restarted = subprocess.Popen(command, env=env)  # noqa: ASYNC220 - not awaited
    try:
        await listening(port, restarted)
        answer = await post(port, "<kill@partner>", payload)
    finally:
        restarted.send_signal(signal.SIGTERM)
        assert restarted.wait(timeout=30) == 0
    assert "; processed\r\n" in verified(certs, answer)
    counts = await stats(config)
    assert (counts["invoices"], counts["processed"], counts["duplicate"]) == (1, 1, 1)
