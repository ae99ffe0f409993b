"""What a RabbitMQ source and publisher share: the settings an `amqp://` URL names, connecting, and declaring the
queue with its dead-letter exchange and queue (the options are listed in `edinbox.sources.rabbitmq`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edinbox._errors import ConfigurationError
from edinbox._urls import mask
from edinbox.sources._failures import failing
from edinbox.sources._options import int_range, name_option, positive_float, server_url, split_url

__all__ = [
    "CONFIRM_WAIT",
    "IDLE_CHECK",
    "MAX_PREFETCH",
    "PREFETCH",
    "Settings",
    "arguments",
    "connect",
    "declare_dead",
    "prefetch_for",
    "refused",
    "settings",
]

_SCHEMES = ("amqp", "amqps")
_QUEUE_TYPES = ("quorum", "classic")
_CONNECT_TIMEOUT = 5.0
PREFETCH = 100
"""Unacked deliveries the broker hands over at once by default (`prefetch_for`)."""
MAX_PREFETCH = 65535
"""The largest prefetch AMQP 0-9-1 can ask for (`basic.qos` carries a 16-bit count)."""
IDLE_CHECK = 30.0
"""Seconds between two looks at the consumed queue while the consumer receives nothing, by default."""
CONFIRM_WAIT = 5.0
"""Seconds a send may wait without any confirm from the broker by default (the `confirm_wait` option)."""


@dataclass(frozen=True)
class Settings:
    """The options of an `amqp://` URL, checked and with their defaults."""

    server: str = field(repr=False)
    """The URL the driver connects to (without the options), its password in clear: never shown."""
    url: str
    """The whole URL, its password masked."""
    queue: str
    queue_type: str
    prefetch: int
    dead: str
    """The dead-letter exchange and queue (default `<queue>.dead`)."""
    heartbeat: float | None
    open_timeout: float
    reconnect_interval: float
    idle_check: float
    confirm_wait: float


def settings(url: str, *, batch: int | None = None, **options: Any) -> Settings:
    """The settings an `amqp://` URL names (keyword `options` win over its query); unknown or invalid options raise
    ConfigurationError. `batch` (the hub's `batch_size`) sets the default `prefetch` (`prefetch_for`)."""
    parts, opts = split_url(url, schemes=_SCHEMES, overrides=options)
    queue = opts.require("queue", name_option)
    named = Settings(
        server=server_url(parts),
        url=mask(url),
        queue=queue,
        queue_type=opts.take("queue_type", _queue_type, "quorum"),
        prefetch=opts.take("prefetch", int_range(1, MAX_PREFETCH), prefetch_for(batch)),
        dead=opts.take("dead", name_option, None) or f"{queue}.dead",
        heartbeat=opts.take("heartbeat", _heartbeat, None),
        open_timeout=opts.take("open_timeout", positive_float, 10.0),
        reconnect_interval=opts.take("reconnect_interval", positive_float, 1.0),
        idle_check=opts.take("idle_check", positive_float, IDLE_CHECK),
        confirm_wait=opts.take("confirm_wait", positive_float, CONFIRM_WAIT),
    )
    opts.finish()
    return named


def prefetch_for(batch: int | None) -> int:
    """The default prefetch for receives of `batch` deliveries: 100, or twice the batch when that is more, so the
    broker has the next batch on its way while the caller settles one (a prefetch no bigger than the batch leaves the
    channel empty until the batch's acks reach the broker)."""
    return min(MAX_PREFETCH, max(PREFETCH, 2 * batch)) if batch else PREFETCH


def _heartbeat(name: str, value: Any) -> float:
    """Seconds between heartbeats: above 0 and at most 65535 (a 16-bit field of the protocol)."""
    seconds = positive_float(name, value)
    if seconds > MAX_PREFETCH:
        raise ValueError(f"{name} must be at most {MAX_PREFETCH} seconds")
    return seconds


def _queue_type(name: str, value: Any) -> str:
    if value not in _QUEUE_TYPES:
        raise ValueError(f"{name} must be one of {', '.join(_QUEUE_TYPES)}")
    return str(value)


async def connect(
    server: str,
    masked: str,
    *,
    heartbeat: float | None,
    reconnect_interval: float = 1.0,
    robust: bool = True,
    name: str = "edinbox",
    **extra: Any,
) -> Any:
    """One connection attempt; a robust connection then reconnects by itself after any outage. `extra` goes to
    aio-pika's `connect` (its `connection_class`, say)."""
    try:
        import aio_pika
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ConfigurationError("amqp:// sources need the rabbitmq extra: pip install 'edinbox[rabbitmq]'") from exc
    kwargs: dict[str, Any] = {} if heartbeat is None else {"heartbeat": heartbeat}
    kwargs["timeout"] = _CONNECT_TIMEOUT  # an address that never answers must not hold open() or receive() forever
    kwargs["client_properties"] = {"connection_name": name}  # what `rabbitmqctl list_connections` shows
    with failing(f"connecting to {masked}", refused=refused):
        if robust:
            return await aio_pika.connect_robust(server, reconnect_interval=reconnect_interval, **kwargs, **extra)
        return await aio_pika.connect(server, **kwargs, **extra)


async def declare_dead(channel: Any, *, queue_type: str, dead: str) -> None:
    """Declare the dead-letter exchange and queue (a robust channel declares them again after each reconnect)."""
    import aio_pika

    exchange = await channel.declare_exchange(dead, aio_pika.ExchangeType.FANOUT, durable=True)
    parked = await channel.declare_queue(dead, durable=True, arguments={"x-queue-type": queue_type})
    await parked.bind(exchange)


def arguments(queue_type: str, *, dead: str) -> dict[str, Any]:
    """The arguments of the consumed queue: its type, and the dead-letter exchange its rejects go to."""
    return {"x-queue-type": queue_type, "x-dead-letter-exchange": dead}


def refused(exc: BaseException) -> bool | str:
    """Whether the broker refused the credentials, or (as text) the URL's virtual host: a ConfigurationError, not
    an outage."""
    from aiormq.exceptions import ProbableAuthenticationError

    if "Connection.OpenOk" in str(exc) and "Connection.Close" in str(exc):  # closed in answer to the vhost's open
        return "the broker refused the virtual host of the URL (it does not exist, or the user has no access to it)"
    return isinstance(exc, ProbableAuthenticationError) or "ACCESS_REFUSED" in str(exc)
