"""The HTTP accounting sink: invoices POSTed to an accounting API in lease mode, with an `Idempotency-Key`.

An HTTP call cannot join the inbox transaction, so the hub runs this sink in the inbox's lease mode: the claim
commits first, the sink POSTs each invoice with `Idempotency-Key: <inbox idempotency key>-<n>` (stable across every
retry of the interchange), and the completion commits after. A crash after the POST and before the completion is
retried, after the lease expired, with the same keys: the API answers the first response and creates nothing new.

Answers: 201 created; 200/201 with `Idempotent-Replayed: true` the same invoice again (counted as created: this
interchange created it); 409 the invoice already exists under another key (a partner re-sent it in a new
interchange: counted as existing). 422 (the key reused with another body) and other 4xx raise AccountingError,
5xx and network errors raise AccountingError too: the message is not settled and the broker redelivers it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from edinbox._errors import ConfigurationError, InboxError
from edinbox._message import Message
from edinbox._urls import mask
from edinbox.hub._accounting import Accounting, Created

__all__ = ["AccountingError", "HttpAccounting", "invoice_json"]


class AccountingError(InboxError):
    """The accounting API refused an invoice or could not be reached; the message is not settled."""


def _plain(value: Any) -> Any:
    """JSON-ready: decimals as exact strings, dates in ISO form, objects as their fields."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _party(party: Any) -> str:
    return str(getattr(party, "id", None) or getattr(party, "name", None) or "") if party is not None else ""


def invoice_json(invoice: Any, message: Message) -> dict[str, Any]:
    """The JSON body of an invoice (an `edinbox.edi.Invoice`), with where it came from."""
    body = _plain(invoice) if dataclasses.is_dataclass(invoice) else dict(_plain(vars(invoice)))
    body.update(
        seller=_party(invoice.seller),
        buyer=_party(getattr(invoice, "buyer", None)),
        source=message.source,
        message_id=message.message_id,
    )
    return {k: v for k, v in body.items() if v is not None}


class HttpAccounting(Accounting):
    """POSTs invoices to `url` with an Idempotency-Key derived from the inbox's key; needs the inbox's lease mode."""

    lease = True
    """The effect is not transactional: the hub runs the inbox in lease mode for this sink."""

    def __init__(self, url: str, *, timeout: float = 10.0, client: Any = None) -> None:
        """Send to `url` (e.g. `http://127.0.0.1:8080/invoices`); `client` is an httpx.AsyncClient to reuse."""
        if not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"the accounting URL must be http:// or https://, got {mask(url)!r}")
        self.url = url
        self.timeout = timeout
        self._client = client

    async def create(self, tx: Any, message: Message, invoices: Sequence[Any]) -> Created:
        """POST each invoice once per idempotency key; raise AccountingError when the API did not settle it."""
        if not getattr(tx, "idempotency_key", None):
            raise ConfigurationError("the HTTP accounting sink needs the inbox's lease mode (tx.idempotency_key)")
        try:
            import httpx
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise ConfigurationError("the HTTP accounting sink needs httpx: pip install 'edinbox[http]'") from exc
        client = self._client or httpx.AsyncClient(timeout=self.timeout)
        created = existing = 0
        try:
            for n, invoice in enumerate(invoices):
                key = f"{tx.idempotency_key}-{n}"
                try:
                    response = await client.post(
                        self.url, json=invoice_json(invoice, message), headers={"Idempotency-Key": key}
                    )
                except httpx.HTTPError as exc:
                    raise AccountingError(f"POST {mask(self.url)} failed: {mask(str(exc))}") from exc
                if response.status_code == 409:
                    existing += 1
                elif response.status_code in (200, 201):
                    created += 1
                else:
                    raise AccountingError(
                        f"POST {mask(self.url)} answered {response.status_code} for key {key}: {response.text[:500]}"
                    )
        finally:
            if self._client is None:
                await client.aclose()
        return Created(created=created, existing=existing)
