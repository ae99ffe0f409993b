"""Sources of deliveries (brokers and the spool folder), opened by URL scheme, all of the same shape."""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any, cast
from urllib.parse import urlsplit

from edinbox._errors import ConfigurationError
from edinbox._urls import mask
from edinbox.sources._base import Delivery, Source

__all__ = ["Delivery", "Publish", "Source", "open_source", "publisher"]

Publish = Callable[[str, Sequence[tuple[str, bytes]]], Awaitable[None]]
"""`await publish(url, [(message_id, payload), ...])`: send payloads with the producer id set."""

# scheme -> "module:attribute"; each source module has a `Source` subclass with `from_url` and a `publish` function
_MODULES = {
    "dir": "edinbox.sources.spool",
    "amqp": "edinbox.sources.rabbitmq",
    "amqps": "edinbox.sources.rabbitmq",
    "nats": "edinbox.sources.nats",
    "redis": "edinbox.sources.redis",
    "kafka": "edinbox.sources.kafka",
}


def _module(url: str) -> Any:
    scheme = urlsplit(url).scheme
    try:
        name = _MODULES[scheme]
    except KeyError:
        known = ", ".join(f"{s}://" for s in _MODULES)
        raise ConfigurationError(f"unknown source URL {mask(url)!r}: the scheme must be one of {known}") from None
    return importlib.import_module(name)


def open_source(
    url: str,
    *,
    consumer: str,
    horizon: timedelta | None = None,
    max_payload: int | None = None,
    **options: Any,
) -> Source:
    """Build (not yet open) the source a URL names, e.g. `dir:///srv/edi` or `amqp://...?queue=edi.in`.

    `horizon` (the inbox's) is how long a source that creates its own storage with an age limit keeps messages,
    unless the URL says otherwise: a NATS stream's `max_age`. `max_payload` (the hub's) is the size over which a
    source that reads payloads itself parks one unread, unless the URL says otherwise: the spool's `max_payload`.
    Other sources ignore them (the hub checks the size of what a broker delivered).
    """
    cls = _module(url).SOURCE
    if horizon is not None and getattr(cls, "keeps_for_horizon", False):
        options = {"horizon": horizon, **options}
    if max_payload is not None and getattr(cls, "parks_oversize", False):
        options = {"payload_limit": max_payload, **options}
    return cast(Source, cls.from_url(url, consumer=consumer, **options))


def publisher(url: str) -> Publish:
    """Return the function that publishes to the broker or spool a URL names."""
    return cast(Publish, _module(url).publish)
