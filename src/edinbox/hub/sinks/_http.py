"""The HTTP accounting sink: invoices POSTed to an accounting API in lease mode, with an `Idempotency-Key`.

An HTTP call cannot join the inbox transaction, so the hub runs this sink in the inbox's lease mode: the claim
commits first, the sink POSTs each invoice with `Idempotency-Key: <inbox idempotency key>-<n>` (stable across every
retry of the interchange), and the completion commits after. A crash after the POST and before the completion is
retried, after the lease expired, with the same keys: the API answers the first response and creates nothing new.

Answers: 201 created; 200/201 with `Idempotent-Replayed: true` the same invoice again (counted as created: this
interchange created it); 409 the invoice already exists under another key (a partner re-sent it in a new
interchange: counted as existing).

With a token (`HttpAccounting(url, token=...)`; the command line reads it from `accounting_token_file` or
`EDINBOX_ACCOUNTING_TOKEN`, never from its arguments) each POST carries `Authorization: Bearer <token>`.

Who pays: a network error, a timeout, 408, 429 and 5xx raise AccountingUnreachable, a TransientError: the claim's
attempt is given back, the delivery stays unsettled and the hub waits the outage out with backoff (a new
connection each try). Any other 4xx (400 a body the API cannot read, 422 the key reused with another body) is the
data's fault and will not change on a retry: AccountingRefused, a PermanentError, parks the interchange at once.
401 and 403 are the hub's credentials, not the data: AccountingForbidden, a ConfigurationError, charges nothing and
stops the hub (exit 1) until the operator sets the right token.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from edinbox import AsyncTransaction
from edinbox._errors import ConfigurationError, InboxError, PermanentError, TransientError
from edinbox._files import read_small
from edinbox._message import Message
from edinbox._urls import addresses, mask
from edinbox.hub.sinks._accounting import Accounting, Created

__all__ = [
    "TOKEN_VARIABLE",
    "AccountingError",
    "AccountingForbidden",
    "AccountingRefused",
    "AccountingUnreachable",
    "HttpAccounting",
    "check_token",
    "invoice_json",
    "read_token",
]

TOKEN_VARIABLE = "EDINBOX_ACCOUNTING_TOKEN"  # noqa: S105 - the name of the variable, not a token
"""The variable holding the accounting API's bearer token, for the hub and for the service alike."""

_TOKEN_LENGTHS = (16, 4096)

_RETRYABLE = frozenset({408, 425, 429})
"""4xx answers that say "later", not "never"."""


class AccountingError(InboxError):
    """The accounting API did not create an invoice (see the two kinds below)."""


class AccountingUnreachable(AccountingError, TransientError):
    """The accounting API could not be reached or answered "later" (network, timeout, 408/429, 5xx): retry."""

    dependency = "accounting"
    """What the hub's outage lines call it."""


class AccountingRefused(AccountingError, PermanentError):
    """The accounting API refused this interchange's data (a 4xx): it is parked, never retried as it is."""


class AccountingForbidden(AccountingError, ConfigurationError):
    """The accounting API refused the hub's credentials (401, 403): nothing is charged, the operator sets the token."""


def check_token(token: str) -> str:
    """`token` if it can be a bearer token (16-4096 visible ASCII characters), else ConfigurationError (never
    quoting it)."""
    low, high = _TOKEN_LENGTHS
    if not low <= len(token) <= high or not all("!" <= c <= "~" for c in token):
        raise ConfigurationError(
            f"the accounting token must be {low}-{high} visible ASCII characters (no spaces), got {len(token)}"
        )
    return token


def read_token(path: Path | str) -> str:
    """The token in the file `path` (surrounding whitespace and the final newline dropped), checked."""
    data = read_small(path, what="accounting token file", limit=_TOKEN_LENGTHS[1] + 1)
    try:
        return check_token(data.decode("ascii").strip())
    except UnicodeDecodeError:
        raise ConfigurationError(f"the accounting token file {path} holds non-ASCII bytes") from None
    except ConfigurationError as exc:
        raise ConfigurationError(f"{path}: {exc}") from None


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

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 10.0, client: Any = None) -> None:
        """Send to `url` (e.g. `http://127.0.0.1:8080/invoices`) with `token` as the bearer token, if any; `client`
        is an httpx.AsyncClient to reuse."""
        if not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"the accounting URL must be http:// or https://, got {mask(url)!r}")
        addresses(url, what="the accounting URL", host=True)  # a typo is refused now, not charged to each invoice
        self.url = url
        self.timeout = timeout
        self._client = client
        self._auth = {} if token is None else {"Authorization": f"Bearer {check_token(token)}"}

    async def create(self, tx: AsyncTransaction, message: Message, invoices: Sequence[Any]) -> Created:
        """POST each invoice once per idempotency key; raise AccountingError when the API did not settle it."""
        if not tx.idempotency_key:
            raise ConfigurationError("the HTTP accounting sink needs the inbox's lease mode (tx.idempotency_key)")
        try:
            import httpx
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise ConfigurationError("the HTTP accounting sink needs httpx: pip install 'edinbox[http]'") from exc
        client = self._client or httpx.AsyncClient(timeout=self.timeout)
        created = existing = 0
        remote: list[str | None] = []
        try:
            for n, invoice in enumerate(invoices):
                key = f"{tx.idempotency_key}-{n}"
                try:
                    response = await client.post(
                        self.url, json=invoice_json(invoice, message), headers={**self._auth, "Idempotency-Key": key}
                    )
                except httpx.HTTPError as exc:
                    raise AccountingUnreachable(f"POST {mask(self.url)} failed: {mask(str(exc))}") from exc
                if response.status_code == 409:
                    existing += 1
                elif response.status_code in (200, 201):
                    created += 1
                else:
                    raise _refusal(response.status_code, f"POST {mask(self.url)}", key, response.text)
                remote.append(_id(response))
        finally:
            if self._client is None:
                await client.aclose()
        return Created(created=created, existing=existing, remote=tuple(remote))


MAX_ID = 255
"""The longest id of the API's kept (the invoices table's `remote_id`); a longer one is not kept."""


def _id(response: Any) -> str | None:
    """The invoice's id in the API's answer (`{"id": ...}`), as text; None when it gives none (or one too long)."""
    try:
        body = response.json()
    except ValueError:
        return None
    found = body.get("id") if isinstance(body, dict) else None
    if found is None or isinstance(found, bool) or not isinstance(found, str | int):
        return None
    text = str(found)
    return text if 0 < len(text) <= MAX_ID else None


def _refusal(status: int, request: str, key: str, body: str) -> AccountingError:
    """The error for an answer that created nothing: transient for 5xx and "later", the operator's for 401 and 403,
    permanent for other 4xx."""
    text = f"{request} answered {status} for key {key}: {body[:500]}"
    if status in (401, 403):
        return AccountingForbidden(f"{text} (set the accounting token: accounting_token_file or {TOKEN_VARIABLE})")
    if status >= 500 or status in _RETRYABLE:
        return AccountingUnreachable(text)
    return AccountingRefused(text)
