"""The hub's side of AS2: its agreements as the AS2 source's partners, and the receipts kept beside its journal.

The AS2 source answers each message with a receipt (MDN) once its delivery is settled; the hub keeps that receipt in
`edinbox_hub_as2_receipts`, written after the batch's commit and before the answer, so a resend of a message is answered
with the bytes its first answer had, and a message whose first attempt never committed has none and is processed.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from edinbox import AsyncTransaction
from edinbox._async_inbox import AsyncInbox
from edinbox.hub.config import HubConfig

if TYPE_CHECKING:  # the `as2` extra's: imported when a hub reads an as2:// source, not by every command
    from edinbox.sources.as2 import Partner

__all__ = ["Receipts", "partners"]


def partners(config: HubConfig) -> list[Partner]:
    """The AS2 partners of the hub's agreements (those with an `as2_id`)."""
    from edinbox.sources.as2 import Partner

    return [
        Partner(
            name=a.as2_id,
            hub=a.as2_hub_id,
            certificate=a.as2_certificate,
            key=a.as2_key,
            hub_certificate=a.as2_hub_certificate,
            security=a.as2_security,
        )
        for a in config.partners.values()
        if a.as2_id
    ]


class Receipts:
    """The receipts answered for AS2 messages, in the hub's table beside the journal `inbox`; an asynchronous MDN
    goes through its outbox."""

    sends = True

    def __init__(self, inbox: AsyncInbox, *, consumer: str) -> None:
        """Keep receipts of `consumer` in `inbox`'s database."""
        self.inbox = inbox
        self.consumer = consumer

    def _params(self, key: tuple[str, str, str]) -> dict[str, object]:
        sender, receiver, message_id = key
        return {"consumer": self.consumer, "sender": sender, "receiver": receiver, "message_id": message_id}

    async def get(self, key: tuple[str, str, str]) -> bytes | None:
        """The receipt stored for (AS2-From, AS2-To, Message-ID), None when none is; StoreError when the database
        failed."""
        rows = await self.inbox.read(lambda tx: tx.unit.fetch("hub_as2_receipt_get", self._params(key)))
        return bytes(rows[0][0]) if rows else None

    async def put(self, key: tuple[str, str, str], receipt: bytes, *, send_to: str = "") -> bytes:
        """Store `receipt` unless one is stored for `key` already, and when it is the first and `send_to` is set,
        publish it to `mdn+<send_to>` in the same transaction (the relay delivers it after the commit); return the
        stored one."""

        async def store(tx: AsyncTransaction) -> bytes:
            params = self._params(key)
            await tx.unit.run("hub_as2_receipt_put", {**params, "receipt": receipt})
            stored = bytes((await tx.unit.fetch("hub_as2_receipt_get", params))[0][0])
            if send_to and stored == receipt:  # ours is the first: each receipt has a Message-ID of its own
                digest = hashlib.sha256("\n".join(key).encode()).hexdigest()[:40]
                await tx.publish(f"mdn+{send_to}", receipt, key=f"mdn:{digest}")
            return stored

        return await self.inbox.transaction(store)
