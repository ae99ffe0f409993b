"""The secrets the process knows, and the redaction every boundary applies before text leaves the process.

Two layers: `mask` (in `edinbox._urls`) hides every URL password and secret option by their shape, anywhere; a
`Secrets` also replaces the exact passwords of the configured URLs wherever they appear, in any spelling (as written,
decoded, percent-encoded, JSON- or repr-escaped), for the text that quotes one outside any URL (a driver's error).
The boundaries that use them: `RedactFilter` on the log handlers (edinbox's records and the drivers': httpx,
aio-pika, aiormq, nats, redis, confluent_kafka print URLs and connection errors), the command line's output and
`Error:` lines (`edinbox.cli._commands`), and every `InboxError`'s message (masked where it is made).

Install the filter on the handler(s) that write, not on a logger: a filter on a logger does not see records
propagated from its children.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from edinbox._urls import mask, secrets

__all__ = ["RedactFilter", "Secrets", "redact", "redact_data"]

_HIDDEN = "***"


def redact(text: str, known: Iterable[str] = ()) -> str:
    """`text` with every URL password and secret option masked and every `known` secret replaced by `***`; a text
    that is one JSON object (a JSON log line) is redacted value by value and stays valid JSON."""
    if text.startswith("{") and text.endswith("}"):
        try:
            document = json.loads(text)
        except ValueError:
            pass
        else:
            clean = redact_data(document, known)
            return text if clean == document else json.dumps(clean, separators=(",", ":"))
    text = mask(text)
    for secret in sorted(known, key=len, reverse=True):  # longest first: one secret may contain another
        text = text.replace(secret, _HIDDEN)
    return text


def redact_data(value: Any, known: Iterable[str] = ()) -> Any:
    """`value` (a JSON-able document: mappings, lists, texts, numbers) with every text in it, keys included,
    redacted one by one, so the document stays what it was (masking its rendered JSON could cross two values)."""
    known = tuple(known)
    if isinstance(value, str):
        return redact(value, known)
    if isinstance(value, Mapping):
        return {redact_data(k, known): redact_data(v, known) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_data(v, known) for v in value]
    return value


class Secrets:
    """The exact secrets of the configured URLs, learned as the settings are read, for every boundary to replace."""

    __slots__ = ("_known",)

    def __init__(self, urls: Iterable[str] = ()) -> None:
        """Know the secrets of `urls`."""
        self._known: tuple[str, ...] = ()
        self.learn(urls)

    def learn(self, urls: Iterable[str]) -> None:
        """Also know the secrets of `urls` (texts without one add nothing)."""
        found = secrets(u for u in urls if isinstance(u, str)) | set(self._known)
        self._known = tuple(sorted(found, key=len, reverse=True))

    def text(self, text: str) -> str:
        """`text` redacted: see `redact`."""
        return redact(text, self._known)

    def data(self, value: Any) -> Any:
        """A JSON-able document redacted text by text: see `redact_data`."""
        return redact_data(value, self._known)


class RedactFilter(logging.Filter):
    """Rewrite each record's message, arguments and traceback text with passwords masked; drop nothing."""

    def __init__(self, *, urls: Iterable[str] = (), known: Secrets | None = None) -> None:
        """Mask URL passwords everywhere, and the passwords of `urls` (and those `known` learns, as it learns them)
        wherever they appear."""
        super().__init__()
        self._known = known if known is not None else Secrets()
        self._known.learn(urls)

    def filter(self, record: logging.LogRecord) -> bool:
        """Mask the record in place (message rendered once, then the arguments dropped); always keep it."""
        redacted = getattr(record.msg, "redacted", None)
        if callable(redacted):  # an event logged as data (`edinbox.loop.Event`): it stays data
            record.msg = redacted(self._known.text)
        else:
            try:
                message = record.getMessage()
            except Exception:  # a record whose arguments do not fit its format: keep the format and arguments' text
                message = f"{record.msg} {record.args!r}"
            record.msg = self._known.text(message)
            record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._known.text(record.exc_text)
        if record.stack_info:
            record.stack_info = self._known.text(record.stack_info)
        return True
