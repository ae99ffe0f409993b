"""The Kafka publisher (confluent-kafka): one producer, each send waited for as long as the brokers answer.

A send produces every record, then waits for their delivery reports in a daemon thread the publisher keeps (a send
cancelled while the brokers are down does not hold the process at exit). It fails with SourceError (transient: the
relay backs off and sends again) once the brokers have answered none of its records for `commit_wait` seconds (the
source's option, default 5), not after a fixed wait: a long send goes on while records are delivered, and an
unreachable cluster fails a send within `commit_wait`. A payload over the producer's `message.max.bytes` is a
LimitError (permanent: no retry can send it).

The destination URL is the source's (a source's URL can be published to): an option neither knows, and a setting
librdkafka refuses (at `open`), is a ConfigurationError naming it, never left to a silent default.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from edinbox._errors import ConfigurationError, LimitError, SourceError
from edinbox._urls import mask
from edinbox.sources._base import Outgoing, Publisher
from edinbox.sources._failures import failing, quietly
from edinbox.sources._kafka_config import (
    COMMIT_WAIT,
    MAX_MOCK_BROKERS,
    DriverLog,
    commit_mode,
    kafka,
    parse,
    producer_settings,
)
from edinbox.sources._kafka_daemon import Daemon
from edinbox.sources._kafka_letters import too_large
from edinbox.sources._options import int_range, name_option, positive_float

__all__ = ["KafkaPublisher"]

_log = logging.getLogger("edinbox.sources.kafka")

_SOURCE_ONLY: dict[str, Callable[[str, Any], str]] = {
    "group": name_option,
    "dead_letter": name_option,
    "commit": commit_mode,
}
"""The source's options a publisher has no use for: checked like the source checks them, then left aside."""


@dataclass(slots=True)
class _Reports:
    """The delivery reports of one send as librdkafka serves them (in the thread that polls)."""

    errors: list[Any] = field(default_factory=list)
    count: int = 0
    last: float = field(default_factory=time.monotonic)
    """When the brokers last answered (or the send started)."""

    def note(self, err: Any, _msg: Any) -> None:
        """librdkafka's delivery callback: one record delivered or failed."""
        self.count += 1
        self.last = time.monotonic()
        if err is not None:
            self.errors.append(err)


class KafkaPublisher(Publisher):
    """Produces to the URL's topic with one producer, the key header (and the record key) set to each producer id
    and the message's headers as further record headers; a send fails once the brokers have not answered for
    `commit_wait` seconds (see the module)."""

    def __init__(self, url: str) -> None:
        """Produce to the topic a `kafka://` URL names; nothing connects before `open()`."""
        hosts, opts, settings = parse(url, {})
        if opts.take("mock", int_range(1, MAX_MOCK_BROKERS), None) is not None:
            raise opts.error("publish needs the mock cluster's host:port (a new mock cluster would be empty)")
        self.url = mask(url)
        self.topic = opts.require("topic", name_option)
        self.header = opts.take("key_header", lambda _n, v: str(v), "message_id")
        self.commit_wait = opts.take("commit_wait", positive_float, COMMIT_WAIT)
        for name, convert in _SOURCE_ONLY.items():  # a source's URL is a destination too: its options are checked
            opts.take(name, convert, None)
        opts.finish()
        if not hosts:
            raise opts.error("host:port of a broker is required")
        self._settings: dict[str, Any] = {**producer_settings(settings), "bootstrap.servers": hosts, "log_level": 3}
        self._settings["logger"] = DriverLog(_log)
        self._producer: Any = None
        self._sends = Daemon()  # the thread sends produce and wait in

    async def open(self) -> None:
        """Create the producer (librdkafka connects, and reconnects, by itself); a setting librdkafka refuses is a
        ConfigurationError (no retry changes it)."""
        ck = kafka()
        with failing(f"creating a producer for {self.url}"):
            try:
                self._producer = ck.Producer(self._settings)
            except ck.KafkaException as exc:
                refused = f"destination URL {self.url!r}: librdkafka refused the settings: {exc}"
                raise ConfigurationError(mask(refused)) from None

    async def send(self, messages: Sequence[Outgoing]) -> None:
        """Produce every record and wait for each delivery report while the brokers answer (see the module)."""
        if self._producer is None:
            raise SourceError(f"publishing to {self.url} failed: the publisher is not open")
        for _, _, headers in messages:
            if headers and self.header in headers:
                raise ConfigurationError(f"the header {self.header!r} is the producer id on {self.url}")
        reports = _Reports()
        left = await asyncio.wrap_future(self._sends.submit(partial(self._produce, messages, reports)))
        errors = reports.errors
        if errors and all(too_large(kafka(), err) for err in errors):
            raise LimitError(f"publishing to {self.url}: a payload is over the producer's message.max.bytes")
        if errors:
            raise SourceError(f"publishing to {self.url} failed: {errors[:3]}")
        if left:
            raise SourceError(
                f"publishing to {self.url} failed: {left} of {len(messages)} records not delivered, no answer from "
                f"the brokers for {self.commit_wait:g} s"
            )

    def _produce(self, messages: Sequence[Outgoing], reports: _Reports) -> int:
        """Produce each record (in the publisher's thread), then wait for their reports until every one came or the
        brokers answered none for `commit_wait` seconds; return how many records were neither delivered nor failed."""
        producer = self._producer
        produced = 0
        for message_id, payload, headers in messages:
            record = [(self.header, message_id), *(headers or {}).items()]
            try:
                self._produce_one(producer, message_id.encode(), payload, record, reports)
            except kafka().KafkaException as exc:  # refused before sending: message.max.bytes
                reports.errors.append(exc.args[0])
                break
            except BufferError:  # the local queue stayed full: the brokers take nothing
                return len(messages) - reports.count
            produced += 1
            producer.poll(0)
        while reports.count < produced and (left := reports.last + self.commit_wait - time.monotonic()) > 0:
            producer.flush(left)  # returns once the queue is empty, else when the brokers were silent for long enough
        return produced - reports.count

    def _produce_one(self, producer: Any, key: bytes, payload: bytes, record: list[Any], reports: _Reports) -> None:
        """Produce one record; while the local queue is full, serve delivery reports until it has room, BufferError
        once the brokers answered none for `commit_wait` seconds."""
        while True:
            try:
                producer.produce(self.topic, value=payload, key=key, headers=record, on_delivery=reports.note)
                return
            except BufferError:
                if time.monotonic() - reports.last >= self.commit_wait:
                    raise
                producer.poll(0.1)

    async def aclose(self) -> None:
        """Drop the producer. A send that returned has nothing left in it; what a failed (or cancelled) send left
        queued is dropped, not flushed: its caller sends it again."""
        producer, self._producer = self._producer, None
        self._sends.stop()
        if producer is not None:
            await quietly(f"closing {self.url}", lambda: asyncio.to_thread(producer.purge))
