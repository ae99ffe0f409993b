"""Kafka plumbing shared by the source and `publish`: the driver import, URL parsing, commit errors, mock cluster."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from edinbox._errors import ConfigurationError
from edinbox._urls import addresses, mask
from edinbox.sources._options import SourceOptions, name_option

__all__ = [
    "COMMIT_WAIT",
    "MAX_MOCK_BROKERS",
    "DriverLog",
    "MockCluster",
    "commit_mode",
    "group_name",
    "kafka",
    "parse",
    "producer_settings",
    "refused_login",
    "transient",
    "unreachable",
]

MAX_MOCK_BROKERS = 16
"""The most brokers `mock=N` starts in this process (a test cluster, not a deployment)."""

COMMIT_WAIT = 5.0
"""Seconds a Kafka call may wait for the brokers by default (the `commit_wait` option): an offset commit, a dead
letter, a publisher's send."""

_RESERVED = frozenset({"bootstrap.servers", "group.id", "enable.auto.commit", "enable.auto.offset.store"})
_CONSUMER_ONLY = ("group.", "session.", "heartbeat.", "max.poll.", "auto.offset.", "isolation.", "partition.")


def kafka() -> Any:
    """The confluent_kafka module, or a ConfigurationError saying which extra to install."""
    try:
        import confluent_kafka
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ConfigurationError("kafka:// sources need confluent-kafka: pip install 'edinbox[kafka]'") from exc
    return confluent_kafka


_UNREACHABLE = (
    "COORDINATOR_NOT_AVAILABLE",
    "REQUEST_TIMED_OUT",
    "_TIMED_OUT",
    "_TRANSPORT",
    "_WAIT_COORD",
    "_ALL_BROKERS_DOWN",
)
_TRANSIENT = (
    *_UNREACHABLE,
    "REBALANCE_IN_PROGRESS",
    "ILLEGAL_GENERATION",
    "UNKNOWN_MEMBER_ID",
    "STALE_MEMBER_EPOCH",
    "FENCED_MEMBER_EPOCH",
    "NOT_COORDINATOR",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "_ASSIGNMENT_LOST",
    "_STATE",
)


def _code_in(ck: Any, error: Any, names: tuple[str, ...]) -> bool:
    if error is None or not hasattr(error, "code"):
        return False
    return error.code() in {getattr(ck.KafkaError, name) for name in names if hasattr(ck.KafkaError, name)}


def transient(ck: Any, error: Any) -> bool:
    """Whether a commit failed because of a group change or a passing outage (not a misconfiguration)."""
    return _code_in(ck, error, _TRANSIENT) or bool(hasattr(error, "retriable") and error.retriable())


def refused_login(ck: Any, error: Any) -> bool:
    """Whether the brokers refused the user or password (a configuration error, not an outage)."""
    return _code_in(ck, error, ("_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED"))


def unreachable(ck: Any, error: Any) -> bool:
    """Whether a commit failed because the brokers (the group coordinator) could not be reached: an outage, not a
    group change."""
    return _code_in(ck, error, _UNREACHABLE)


class DriverLog:
    """librdkafka's log lines (its `logger` setting) passed to a logger, a broker's connection failures thinned out.

    librdkafka logs each failed connection to a broker (facility `FAIL`: refused, reset, timed out) at error level,
    and while the brokers are down it tries again about twenty times a second: a minute's outage would write a
    thousand error lines. The first of them is logged at warning level (the outage is transient, librdkafka
    reconnects by itself), then at most one every `every` seconds, saying how many were left out; other lines pass
    as they come. librdkafka calls `log` from its own threads as well.
    """

    def __init__(self, logger: logging.Logger, *, every: float = 60.0, clock: Callable[[], float] = time.monotonic):
        """Log to `logger`, one connection failure per `every` seconds at most."""
        self.logger = logger
        self.every = every
        self.clock = clock
        self._last: float | None = None
        self._left_out = 0
        self._lock = threading.Lock()

    def log(self, level: int, msg: str, *args: Any) -> None:
        """One line from librdkafka (`msg` is `"%s [%s] %s"` over facility, client name and text)."""
        if not args or args[0] != "FAIL":
            self.logger.log(level, msg, *args)
            return
        now = self.clock()
        with self._lock:
            if self._last is not None and now - self._last < self.every:
                self._left_out += 1
                return
            left, self._left_out, self._last = self._left_out, 0, now
        note = f" ({left} more connection failures in the last {self.every:.0f} s not logged)" if left else ""
        self.logger.log(min(level, logging.WARNING), msg + "%s", *args, note)


def commit_mode(name: str, value: Any) -> str:
    """The `commit` option: `ack` or `receive`."""
    if value not in ("ack", "receive"):
        raise ValueError(f"{name} must be ack or receive")
    return str(value)


def producer_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """The librdkafka settings of a URL that a producer accepts (consumer settings left out)."""
    return {k: v for k, v in settings.items() if not k.startswith(_CONSUMER_ONLY)}


class MockCluster:
    """A librdkafka mock cluster hosted by this process; other processes reach it through `bootstrap` (TCP)."""

    def __init__(self, brokers: int = 1) -> None:
        """Start `brokers` mock brokers listening on loopback ports."""
        self._host: Any = kafka().Producer({"test.mock.num.brokers": str(brokers), "log_level": 3})
        found = self._host.list_topics(timeout=10).brokers.values()
        self.bootstrap = ",".join(f"{b.host}:{b.port}" for b in found)
        """`host:port,...` of the mock brokers, usable as bootstrap servers by any client in any process."""

    def url(self, *, topic: str, group: str | None = None, **settings: str) -> str:
        """A `kafka://` URL for a topic of this cluster."""
        query = {"topic": topic, **({"group": group} if group else {}), **settings}
        return f"kafka://{self.bootstrap}?" + "&".join(f"{k}={v}" for k, v in query.items())

    def close(self) -> None:
        """Stop the mock brokers."""
        self._host = None


def parse(url: str, overrides: Mapping[str, Any]) -> tuple[str, SourceOptions, dict[str, str]]:
    """Split a kafka:// URL into bootstrap servers, edinbox options and librdkafka settings."""
    if not isinstance(url, str) or not url.startswith("kafka://"):
        raise ConfigurationError(f"source URL {mask(str(url))!r}: the scheme must be kafka")
    addresses(url, what="source URL", many=True)  # bootstrap servers: host:port,host:port
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    names = [name for name, _ in pairs]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigurationError(f"source URL {mask(url)!r}: option(s) given twice: {', '.join(repeated)}")
    settings = {k: v for k, v in pairs if "." in k}
    settings.update({str(k): str(v) for k, v in dict(overrides.get("settings") or {}).items()})
    reserved = sorted(_RESERVED & set(settings))
    if reserved:
        raise ConfigurationError(f"source URL {mask(url)!r}: {', '.join(reserved)} is set by edinbox, not the URL")
    if parts.username:
        settings["sasl.username"] = unquote(parts.username)
        settings["sasl.password"] = unquote(parts.password or "")
    query = {k: v for k, v in pairs if "." not in k}
    opts = SourceOptions(url, query, {k: v for k, v in overrides.items() if k != "settings"})
    return parts.netloc.rpartition("@")[2], opts, settings


def group_name(opts: Any, consumer: str) -> str:
    """The consumer's name as the group's, when it can be one."""
    try:
        return name_option("group", consumer)
    except ValueError as exc:
        raise opts.error(f"the consumer name {consumer[:80]!r} cannot be a group name ({exc}); set group=") from None
