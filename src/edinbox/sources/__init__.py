"""Sources of deliveries (brokers and the spool folder), opened by URL scheme, all of the same shape."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from types import ModuleType
from typing import Any, cast
from urllib.parse import urlsplit

from edinbox._errors import ConfigurationError
from edinbox._urls import mask
from edinbox.sources._base import STOP_CHECK, Delivery, Outgoing, Publisher, Source, receive_until
from edinbox.sources._failures import unless_cancelled

__all__ = [
    "STOP_CHECK",
    "Delivery",
    "Outgoing",
    "Publish",
    "Publisher",
    "Source",
    "check_destination",
    "check_source",
    "check_url",
    "open_publisher",
    "open_source",
    "publisher",
    "reach",
    "receive_until",
    "unless_cancelled",
]

Publish = Callable[[str, Sequence[tuple[str, bytes] | Outgoing]], Awaitable[None]]
"""`await publish(url, [(message_id, payload), ...])`: send payloads with the producer id set (`Outgoing` values
carry headers too); each call opens a connection and closes it."""

_MODULES = {
    "dir": "spool",
    "amqp": "rabbitmq",
    "amqps": "rabbitmq",
    "nats": "nats",
    "redis": "redis",
    "kafka": "kafka",
    "sftp": "sftp",
    "as2": "as2",
    "as2s": "as2",
    "mdn+http": "as2",
    "mdn+https": "as2",
}
"""URL scheme -> the module of this package that serves it: a `Source` subclass with `from_url` (`SOURCE`), a
`publish` function and a `PUBLISHER`."""


def _module(url: str) -> ModuleType:
    """The source module `url`'s scheme names, imported on first use: each needs its broker's driver, an extra."""
    scheme = urlsplit(url).scheme
    name = _MODULES.get(scheme)
    if name is None:
        known = ", ".join(f"{s}://" for s in _MODULES)
        raise ConfigurationError(f"unknown source URL {mask(url)!r}: the scheme must be one of {known}")
    return _load(name)


def _load(name: str) -> ModuleType:
    """Import the source module `name` (a value of `_MODULES`)."""
    if name == "spool":
        from edinbox.sources import spool

        return spool
    if name == "rabbitmq":
        from edinbox.sources import rabbitmq

        return rabbitmq
    if name == "nats":
        from edinbox.sources import nats

        return nats
    if name == "redis":
        from edinbox.sources import redis

        return redis
    if name == "kafka":
        from edinbox.sources import kafka

        return kafka
    if name == "sftp":
        from edinbox.sources import sftp

        return sftp
    from edinbox.sources import as2

    return as2


def open_source(
    url: str,
    *,
    consumer: str,
    horizon: timedelta | None = None,
    max_payload: int | None = None,
    batch: int | None = None,
    on_lost: Callable[[str], None] | None = None,
    partners: Sequence[Any] | None = None,
    receipts: Any = None,
    **options: Any,
) -> Source:
    """Build (not yet open) the source a URL names, e.g. `dir:///srv/edi` or `amqp://...?queue=edi.in`.

    `horizon` (the inbox's) is how long a source that creates its own storage with an age limit keeps messages,
    unless the URL says otherwise: a NATS stream's `max_age`. `max_payload` (the hub's) is the size over which a
    source that reads payloads itself parks one unread, unless the URL says otherwise: the spool's `max_payload`.
    `batch` (the hub's `batch_size`) is how many deliveries one receive asks for: a source whose broker pushes
    deliveries ahead of the receive sets its default window from it, unless the URL says otherwise: RabbitMQ's
    `prefetch`. `on_lost` is called with a queue's name each time a source whose broker can lose or delete its queue
    under it (RabbitMQ) found it so: the messages it held may be lost. `partners` (`edinbox.sources.as2.Partner`
    agreements) and `receipts` (where answers are kept) go to a source that answers its senders (AS2). Other sources
    ignore them (the hub checks the size of what a broker delivered).
    """
    cls = _module(url).SOURCE
    if horizon is not None and getattr(cls, "keeps_for_horizon", False):
        options = {"horizon": horizon, **options}
    if max_payload is not None and getattr(cls, "parks_oversize", False):
        options = {"payload_limit": max_payload, **options}
    if batch is not None and getattr(cls, "prefetches", False):
        options = {"batch": batch, **options}
    if on_lost is not None and getattr(cls, "reports_lost", False):
        options = {"on_lost": on_lost, **options}
    if getattr(cls, "takes_partners", False):
        options = {"partners": partners or (), "receipts": receipts, **options}
    return cast(Source, cls.from_url(url, consumer=consumer, **options))


def publisher(url: str) -> Publish:
    """Return the function that publishes to the broker or spool a URL names."""
    return cast(Publish, _module(url).publish)


def open_publisher(url: str) -> Publisher:
    """Build (not yet open) the publisher of the broker or spool a URL names, kept open across sends."""
    return cast(Publisher, _module(url).PUBLISHER(url))


def check_url(url: str, *, consumer: str, **options: Any) -> None:
    """Refuse a source URL that cannot work, without any I/O: an unknown scheme, a malformed address (a port outside
    1-65535, a host missing where the broker needs one), an unknown option (the closest known one) or a value out
    of its range, for this `consumer` and the hub's `options` (those of `open_source`: horizon, max_payload, batch)."""
    open_source(url, consumer=consumer, **options)


def check_destination(url: str) -> None:
    """Refuse, without any I/O, a destination URL (a relay's or `publish --to`) its publisher cannot send to: the
    checks of `check_url` for a publisher."""
    open_publisher(url)


def check_source(url: str, *, exists: bool = True, consumer: str = "check") -> None:
    """Refuse, before anything is opened or created, a source that cannot work: a missing driver (the extra to
    install), what `check_url` refuses for `consumer`, and with `exists` a spool folder that does not exist."""
    from edinbox._extras import require

    require(url)
    module = _module(url)
    check_url(url, consumer=consumer)
    if exists and module.__name__ == "edinbox.sources.spool":
        from edinbox.sources.spool import spool_path

        root = spool_path(url)
        if not root.is_dir():
            raise ConfigurationError(
                f"the spool folder {root} does not exist: `edinbox init --source {url}` creates it"
            )


async def reach(url: str, *, consumer: str) -> timedelta | None:
    """Check that a source can be reached without changing it, and return its redelivery horizon (None: unknown).

    A spool folder is only looked at (it must exist, and none of its subfolders be a symlink; opening it would create
    its folders and a claim folder); an AS2 listening address is only checked (binding it would take the running
    hub's port); a broker is connected to and closed.
    """
    check_source(url)
    if _module(url).__name__ == "edinbox.sources.as2":
        return None
    if _module(url).__name__ == "edinbox.sources.spool":
        from edinbox.sources.spool import check, spool_path

        check(spool_path(url))  # no subfolder is a symlink
        return None
    async with open_source(url, consumer=consumer) as source:
        return source.horizon
