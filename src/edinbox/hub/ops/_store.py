"""The message store as operators use it: what `show` says of a kept payload, `edinbox search`, `edinbox export`.

An export is one folder (or a tar of it) that an auditor checks with `sha256sum -c SHA256SUMS` alone: the payload as
received, whose line carries the SHA-256 recorded when the message settled; for an interchange, its canonical form,
whose line carries the journal's fingerprint (the fingerprint is the SHA-256 of that form: `edi._key`); the journal
row, the invoices created and the acknowledgments sent (with their bytes while the outbox keeps them) as JSON.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import re
import tarfile
from pathlib import Path
from typing import Any

from edinbox import edi
from edinbox._async_inbox import AsyncInbox
from edinbox._errors import ConfigurationError
from edinbox._payloads import Kept
from edinbox.hub.database import has_hub
from edinbox.hub.ops._output import as_dict, json_value
from edinbox.hub.ops._redrive import join_key, split_key

__all__ = ["export", "kept_fields", "search"]

SUMS = "SHA256SUMS"
"""The bundle's digest file, in `sha256sum`'s format."""
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_README = """\
This folder is the record of one message as edinbox kept it. Check it with:

    sha256sum -c SHA256SUMS

payload.*      the bytes received; its line in SHA256SUMS is the SHA-256 recorded when the message settled
               (journal.json: kept.sha256). A payload over the hub's payload_cap was kept cut (kept.truncated):
               the file then holds its first bytes only, with a line of its own digest.
canonical.edi  (an interchange) its segments normalised as edinbox compares them; its line in SHA256SUMS is the
               journal's fingerprint (journal.json: fingerprint), the SHA-256 of exactly these bytes.
journal.json   the journal row; invoices.json the invoices the message created; acknowledgments.json the
               acknowledgments sent for it and their relay status, their bytes in acknowledgments/ while the
               outbox keeps them.
"""


def kept_fields(kept: Kept | None) -> dict[str, Any]:
    """What `show` says of a kept payload (`kept.*`): its digest, size, content type, cut or not, and when."""
    if kept is None:
        return {"kept": None}
    fields = ("sha256", "size", "content_type", "truncated", "kept_at")
    return {"kept": {name: json_value(getattr(kept, name)) for name in fields}}


async def search(inbox: AsyncInbox, text: str, *, limit: int) -> list[dict[str, Any]]:
    """The kept interchanges holding `text` (a PO number, an invoice number, a GLN), newest first: key, size, when."""
    found = await inbox.search(text, limit=limit)
    return [{"key": join_key(f.source, f.message_id), "size": f.size, "kept_at": json_value(f.kept_at)} for f in found]


async def export(inbox: AsyncInbox, key: str, out: Path, *, shown: dict[str, Any]) -> list[str]:
    """Write the bundle of journal row `key` (`shown`: what `show` gave of it) to `out`: a folder, or a tar file
    when `out` ends in `.tar` or `.tar.gz`. Return the files written (SHA256SUMS last). ConfigurationError when no
    payload of it is kept."""
    source, message_id = split_key(key)
    params = {"consumer": inbox.consumer, "source": source, "message_id": message_id}
    kept = await inbox.payload(source, message_id)
    record = await inbox.get(source, message_id)
    acks = []
    if await has_hub(inbox):
        acks = await inbox.read(lambda tx: tx.unit.fetch("hub_acknowledgment_bytes_of", params))
    if record is None:
        raise ConfigurationError(f"no journal row {key!r} for consumer {inbox.consumer!r}")
    payload = kept.payload if kept is not None else record.payload
    if payload is None:
        raise ConfigurationError(
            f"{key!r} keeps no payload: it settled while keep_payloads was off, or its payload was purged"
        )
    files, sums = _bundle(record, kept, bytes(payload), shown, acks)
    await asyncio.to_thread(_write, out, files, sums)
    return [*files, SUMS]


def _bundle(
    record: Any, kept: Kept | None, payload: bytes, shown: dict[str, Any], acks: list[Any]
) -> tuple[dict[str, bytes], dict[str, str]]:
    """The bundle's files by name, and the digest each one's line in SHA256SUMS carries."""
    interchanges = _interchanges(payload)
    name = "payload.edi" if interchanges else "payload.bin"
    files: dict[str, bytes] = {name: payload}
    sums: dict[str, str] = {}
    if kept is not None and not kept.truncated:
        sums[name] = kept.sha256  # recorded when it settled: a changed file fails the check
    if len(interchanges) == 1 and interchanges[0].fingerprint() == record.fingerprint:
        files["canonical.edi"] = interchanges[0].canonical()
        sums["canonical.edi"] = record.fingerprint  # the journal's own value, not computed again here
    row = as_dict(record)
    row["payload"] = row["conflict_payload"] = None  # the bytes are the payload file
    row.update(kept_fields(kept))
    files["journal.json"] = _json(row)
    files["invoices.json"] = _json(shown.get("invoices", []))
    files["acknowledgments.json"] = _json(shown.get("acknowledgments", []))
    for number, (outbox_key, body) in enumerate(acks, start=1):
        files[f"acknowledgments/{number:02d}-{_UNSAFE.sub('_', str(outbox_key))[:80]}.edi"] = bytes(body)
    files["README.txt"] = _README.encode()
    for file, content in files.items():
        sums.setdefault(file, hashlib.sha256(content).hexdigest())
    return files, sums


def _interchanges(payload: bytes) -> list[edi.Interchange]:
    """The interchanges of `payload`; none when it is not EDI."""
    try:
        return edi.parse(payload)
    except edi.EdiSyntaxError:
        return []


def _json(value: Any) -> bytes:
    """`value` as indented JSON with a final line break."""
    return (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n").encode()


def _write(out: Path, files: dict[str, bytes], sums: dict[str, str]) -> None:
    """Write the files and SHA256SUMS into folder `out`, or into the tar file `out`."""
    listing = "".join(f"{sums[name]}  {name}\n" for name in files).encode()
    everything = {**files, SUMS: listing}
    if out.name.endswith((".tar", ".tar.gz", ".tgz")):
        with tarfile.open(out, "w:gz" if out.name.endswith("gz") else "w") as tar:
            for name, content in everything.items():
                info = tarfile.TarInfo(name)
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
        return
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigurationError(f"{out} is not an empty folder: export writes a bundle into a folder of its own")
    for name, content in everything.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
