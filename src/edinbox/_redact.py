"""A logging filter that keeps passwords out of every log line, edinbox's own and the drivers' (httpx, aio-pika,
aiormq, nats, redis, confluent_kafka print URLs and connection errors).

Install it on the handler(s) that write, not on a logger: a filter on a logger does not see records propagated from
its children. `RedactFilter(urls=[...])` also replaces the exact passwords of the configured URLs wherever they
appear, in any spelling (as written, decoded, percent-encoded), even outside a URL.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from edinbox._urls import mask, secrets

__all__ = ["RedactFilter", "redact"]

_HIDDEN = "***"


def redact(text: str, known: Iterable[str] = ()) -> str:
    """`text` with every URL password masked and every `known` secret replaced by `***`."""
    text = mask(text)
    for secret in sorted(known, key=len, reverse=True):  # longest first: one secret may contain another
        text = text.replace(secret, _HIDDEN)
    return text


class RedactFilter(logging.Filter):
    """Rewrite each record's message, arguments and traceback text with passwords masked; drop nothing."""

    def __init__(self, *, urls: Iterable[str] = ()) -> None:
        """Mask URL passwords everywhere, and the passwords of `urls` wherever they appear."""
        super().__init__()
        self._known = frozenset(secrets(urls))

    def filter(self, record: logging.LogRecord) -> bool:
        """Mask the record in place (message rendered once, then the arguments dropped); always keep it."""
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not fit its format: keep the format and arguments' text
            message = f"{record.msg} {record.args!r}"
        record.msg = redact(message, self._known)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, self._known)
        if record.stack_info:
            record.stack_info = redact(record.stack_info, self._known)
        return True
