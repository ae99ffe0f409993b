"""Kafka (confluent-kafka): offsets committed only after the transaction settled, at least once across rebalances.

URL: `kafka://host:port[,host:port...]?topic=edi.in&group=hub` with the options

- `topic` (required): the topic read;
- `group`: the consumer group (default: the inbox consumer's name);
- `key_header`: the record header holding the producer's id (default `message_id`);
- `dead_letter`: the topic rejected records are produced to (default `<topic>.dead`);
- `commit`: `ack` (default) commits at each ack; `receive` commits what was settled at the next receive (and on
  close or revoke): one commit per batch instead of one per record, and at most one batch read again after a crash;
- `commit_wait`: seconds settling a record may wait for the brokers (default 5): an ack whose offset commit, or a
  reject whose dead-letter record, takes longer raises SourceError (the commit or the record goes on in the
  background), and receives raise it until it is done; a publisher's send (`KafkaPublisher`, the relay's) fails
  with SourceError once the brokers have answered none of its records for as long;
- `mock=N`: host an in-process librdkafka mock cluster of N brokers instead of connecting (one-process demos);
- any librdkafka setting by its dotted name: `session.timeout.ms=6000`, `group.protocol=consumer`,
  `security.protocol=SASL_SSL`, ... (a user and password in the URL become `sasl.username` / `sasl.password`).

Kafka has no per-record ack: progress is one committed offset per partition. Auto commit is off; `ack` marks the record
settled and synchronously commits the lowest offset below which every delivered record is settled, so an ack out of
order never commits past a record still in flight. `nack` seeks the partition back to the record (and pauses it for
`delay`); `reject` produces the record to the dead-letter topic (in a daemon thread the source keeps), then settles it.
On a rebalance the revoked partitions commit what is settled and drop the rest, which the next owner reads again. Every
commit carries the highest offset delivered so far in its metadata, so the next owner flags records at or below it as
redelivered. The key is the producer's header: an offset catches a redelivery, never a producer's retry (a new offset).

librdkafka reconnects to the brokers by itself; every failure it reports reaches the caller as SourceError (a settings
error librdkafka refuses is a ConfigurationError at `open`). Its log lines go to this module's logger, its repeated
connection failures during an outage thinned to one warning a minute (`DriverLog`). librdkafka's own synchronous commit
waits for the group coordinator as long as the brokers are down, so commits run in a daemon thread the source keeps and
each is waited for `commit_wait` seconds at most: an ack (or, with `commit=receive`, a receive) whose commit cannot
reach the coordinator in time, or fails because the brokers are unreachable, raises SourceError. The record stays
settled in the tracker, so a later commit covers it (at worst it is redelivered and found settled by the inbox); until
the commit left behind is done and the settled offsets are committed, every receive raises SourceError too, so a hub
sees one outage of its source from the first failed commit to the brokers' return. A reject's dead-letter record is
waited for the same way, in a second daemon thread (a commit stuck in the first must not hold it): one that the brokers
have not taken within `commit_wait` stays queued in librdkafka, its record unsettled, and receives raise SourceError
until it is produced (the receive that finds it produced settles the record: it is parked once, not read and parked
again for every retry); one that fails seeks back to its record, which is read and rejected again, unless it failed
because the record is too large for the producer or the dead-letter topic (MSG_SIZE_TOO_LARGE, which no retry changes):
then a stand-in without the payload is produced in its place, saying why and where the record is (`_kafka_letters`),
with one warning line, and the record is settled; the reject then returns where the payload is (the topic read, while
its retention keeps it), for the hub's rejected table.
Dead letters still queued at `aclose` are dropped: their records go to the next owner, which rejects them again.
From the start of `aclose` (and before `open`) an ack, nack or reject raises SourceError saying the source is closed:
it commits, seeks and produces nothing (no dead-letter producer is created after the one `aclose` drops), and its
record is delivered again.
Nothing expires while a record is held (`ack_wait` is None, `in_progress` does nothing), but a consumer must call
`receive` within `max.poll.interval.ms`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from edinbox._errors import ConfigurationError, SourceError
from edinbox._logs import log_event
from edinbox._urls import mask
from edinbox.sources._base import Delivery, Outgoing, Source, publish_once
from edinbox.sources._failures import failing, quietly
from edinbox.sources._failures import reason as failure
from edinbox.sources._kafka_commits import HORIZON, Commits
from edinbox.sources._kafka_config import (
    COMMIT_WAIT,
    MAX_MOCK_BROKERS,
    DriverLog,
    MockCluster,
    commit_mode,
    group_name,
    kafka,
    parse,
    producer_settings,
    refused_login,
)
from edinbox.sources._kafka_daemon import Daemon
from edinbox.sources._kafka_dead_letters import produce_letter
from edinbox.sources._kafka_letters import Posted, letter
from edinbox.sources._kafka_offsets import OffsetTracker, TopicPartition
from edinbox.sources._kafka_publisher import KafkaPublisher
from edinbox.sources._options import int_range, name_option, positive_float

__all__ = ["PUBLISHER", "SOURCE", "KafkaPublisher", "KafkaSource", "MockCluster", "publish"]

_log = logging.getLogger(__name__)


class KafkaSource(Source):
    """A topic read by a consumer group, offsets committed after the transaction settled."""

    def __init__(
        self,
        bootstrap: str,
        *,
        topic: str,
        group: str,
        key_header: str = "message_id",
        dead_letter: str | None = None,
        commit: str = "ack",
        commit_wait: float = COMMIT_WAIT,
        settings: Mapping[str, str] | None = None,
        mock_brokers: int | None = None,
        url: str | None = None,
    ) -> None:
        """Configure (not yet connect) a consumer of `topic` in consumer group `group`."""
        self.bootstrap = bootstrap
        self.topic = topic
        self.group = group
        self.key_header = key_header
        if commit not in ("ack", "receive"):
            raise ConfigurationError(f"commit must be 'ack' or 'receive', got {commit!r}")
        self.commit = commit
        self.commit_wait = commit_wait
        self.dead_letter = dead_letter or f"{topic}.dead"
        self.url = mask(url or f"kafka://{bootstrap}?topic={topic}&group={group}")
        self._settings = dict(settings or {})
        self._mock_brokers = mock_brokers
        self._tracker = OffsetTracker()
        self._lock = threading.Lock()  # tracker, commits and pauses, shared with the rebalance callbacks' thread
        self._polling = asyncio.Lock()  # one consume or close at a time
        self._paused: dict[TopicPartition, float] = {}
        self._consumer: Any = None
        self._closed = True
        """Until `open`, and from the start of `aclose`: acks, nacks and rejects raise SourceError (set under the lock,
        so none runs a commit, a seek or a dead letter, or creates a producer, once `aclose` has begun)."""
        self._producer: Any = None
        self._mock: MockCluster | None = None
        self._driver_log = DriverLog(_log)
        self._offsets = Commits(self._tracker, url=self.url, commit_wait=commit_wait, consumer=lambda: self._consumer)
        self._letters = Daemon()  # the thread dead letters are produced in
        self._parking: dict[tuple[TopicPartition, int], concurrent.futures.Future[Posted]] = {}
        """The dead letters that outlived `commit_wait`, by record, and what became of them once it is known."""

    @classmethod
    def from_url(cls, url: str, *, consumer: str, **options: Any) -> KafkaSource:
        """Build from `kafka://host:port?topic=edi.in&group=hub`; bad options raise ConfigurationError."""
        hosts, opts, settings = parse(url, options)
        mock = opts.take("mock", int_range(1, MAX_MOCK_BROKERS), None)
        source = cls(
            hosts,
            topic=opts.require("topic", name_option),
            group=opts.take("group", name_option, None) or group_name(opts, consumer),
            key_header=opts.take("key_header", lambda _n, v: str(v), "message_id"),
            dead_letter=opts.take("dead_letter", name_option, None),
            commit=opts.take("commit", commit_mode, "ack"),
            commit_wait=opts.take("commit_wait", positive_float, COMMIT_WAIT),
            settings=settings,
            mock_brokers=mock,
            url=url,
        )
        opts.finish()
        if not hosts and mock is None:
            raise opts.error("host:port of a broker (or mock=N) is required")
        return source

    def _config(self) -> dict[str, Any]:
        return {
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "log_level": 3,
            "logger": self._driver_log,  # librdkafka's lines go through logging (and its filters), not to stderr
            **self._settings,
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
        }

    async def open(self) -> None:
        """Prove that a broker answers (its metadata, within `commit_wait`: else a SourceError, an outage the caller
        waits out), then join the consumer group and subscribe to the topic."""
        ck = kafka()
        if self._mock_brokers is not None and self._mock is None:
            self._mock = MockCluster(self._mock_brokers)
            self.bootstrap = self._mock.bootstrap
        try:
            consumer = ck.Consumer(self._config())
        except ck.KafkaException as exc:
            raise ConfigurationError(mask(f"source URL {self.url!r}: librdkafka refused the settings: {exc}")) from None
        try:  # librdkafka connects in the background: without this, brokers that are down look like an idle topic
            await asyncio.to_thread(consumer.list_topics, timeout=self.commit_wait)
        except Exception as exc:
            await quietly(f"closing the consumer of {self.url}", lambda: asyncio.to_thread(consumer.close))
            error = exc.args[0] if exc.args else None
            if refused_login(ck, error):
                raise ConfigurationError(mask(f"Kafka at {self.url} refused the user or password")) from None
            raise SourceError(
                mask(f"no Kafka broker answered at {self.url} within {self.commit_wait:g} s: {failure(exc)}")
            ) from exc
        with failing(f"subscribing to {self.topic} on {self.url}"):
            consumer.subscribe(
                [self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
            )
        self._consumer = consumer
        self._closed = False

    # The rebalance callbacks run inside consume(), in its worker thread.
    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        horizons: dict[TopicPartition, int] = {}
        try:
            for p in consumer.committed(partitions, timeout=10):
                meta = p.metadata or ""
                if meta.startswith(HORIZON) and meta[len(HORIZON) :].isdigit():
                    horizons[(p.topic, p.partition)] = int(meta[len(HORIZON) :])
        except kafka().KafkaException as exc:
            fields = {"source": self.url, "error": str(exc), "then": "redelivered flags may be missing"}
            log_event(_log, logging.WARNING, "committed-offsets-unread", fields)
        with self._lock:
            for p in partitions:
                tp = (p.topic, p.partition)
                self._tracker.assign(tp, horizon=horizons.get(tp, -1))

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        with self._lock:
            points = {}
            for p in partitions:
                tp = (p.topic, p.partition)
                horizon = self._tracker.horizon(tp)
                point = self._tracker.revoke(tp)
                self._paused.pop(tp, None)
                self._forget(tp)
                if point is not None:
                    points[tp] = (point, horizon)
            self._offsets.commit(points)

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        with self._lock:
            for p in partitions:
                self._tracker.lose((p.topic, p.partition))
                self._paused.pop((p.topic, p.partition), None)
                self._forget((p.topic, p.partition))

    def _forget(self, tp: TopicPartition) -> None:
        """Drop the dead letters left waiting for a partition given up: its next owner reads their records again."""
        for handle in [h for h in self._parking if h[0] == tp]:
            del self._parking[handle]

    def _catch_up(self, timeout: float) -> None:
        """Before a receive: wait (`timeout` seconds at most) for the dead letters and the commit left waiting, then
        settle the records whose dead letters were produced and commit what is settled; SourceError while any of them
        cannot reach the brokers. The caller holds the lock."""
        deadline = time.monotonic() + timeout
        for handle, produced in list(self._parking.items()):
            producer = self._producer
            while producer is not None and not produced.done() and (left := deadline - time.monotonic()) > 0:
                producer.poll(left)  # serves the delivery reports
            if not produced.done():
                raise SourceError(f"a dead letter on {self.url} still waits for the brokers")
            del self._parking[handle]
            if produced.result().error is None:
                self._settled(handle)
            else:  # it failed: the record is read again, and rejected again
                self._rewind(handle, None)
        self._offsets.catch_up(deadline)

    def _consume(self, max_messages: int, timeout: float) -> list[Delivery]:
        ck = kafka()
        deadline = time.monotonic() + timeout
        while True:
            now = time.monotonic()
            with self._lock:
                self._catch_up(deadline - now)
                if self.commit == "receive":
                    settled = self._tracker.due()
                    self._offsets.commit({tp: (o, self._tracker.horizon(tp)) for tp, o in settled.items()}, strict=True)
                due = [tp for tp, until in self._paused.items() if until <= now]
                for tp in due:
                    del self._paused[tp]
                if due:
                    self._consumer.resume([ck.TopicPartition(t, p) for t, p in due])
                wait = min([deadline - now, *(until - now for until in self._paused.values())])
            records = self._consumer.consume(max_messages, max(wait, 0.0))
            deliveries = self._deliveries(records)
            if deliveries or time.monotonic() >= deadline:
                return deliveries

    def _deliveries(self, records: list[Any]) -> list[Delivery]:
        deliveries = []
        with self._lock:
            for record in records:
                error = record.error()
                if error is None:
                    deliveries.append(self._delivery(record))
                elif error.fatal():
                    raise SourceError(f"the Kafka consumer on {self.url} failed: {error}")
                else:
                    log_event(_log, logging.WARNING, "consumer-error", {"source": self.url, "error": str(error)})
            # remember at the broker how far delivery went, so a next owner can flag redeliveries
            touched = {d.handle[0] for d in deliveries}
            points = {tp: self._tracker.point(tp) for tp in touched}
            self._offsets.commit(
                {tp: (point, self._tracker.horizon(tp)) for tp, point in points.items() if point is not None}
            )
        return deliveries

    def _delivery(self, record: Any) -> Delivery:
        tp = (record.topic(), record.partition())
        offset = record.offset()
        again = self._tracker.delivered(tp, offset)
        headers = {name: (value or b"").decode("utf-8", errors="replace") for name, value in record.headers() or []}
        return Delivery(
            record.value() or b"",
            message_id=headers.get(self.key_header) or None,
            coordinates=f"{tp[0]}/{tp[1]}/{offset}",
            source=f"kafka:{tp[0]}",
            headers=headers,
            redelivered=again,
            handle=(tp, offset),
        )

    def _leave(self) -> None:
        """As `aclose` begins: refuse acks, nacks and rejects from now on (`_closed`), then commit what is settled."""
        with self._lock:
            self._closed = True
            due = self._tracker.due()
            self._offsets.commit({tp: (point, self._tracker.horizon(tp)) for tp, point in due.items()})

    def _refused(self, what: str) -> SourceError:
        """The error of an ack, nack or reject once the source is closed (or before it is open)."""
        return SourceError(f"{what} on {self.url} failed: the source is closed (its record is delivered again)")

    def _drop_producer(self) -> Any:
        """Take the dead letters' producer away (under the lock: a reject that has not created one by now never
        will, `_closed` being set)."""
        with self._lock:
            producer, self._producer = self._producer, None
        return producer

    async def receive(self, *, max_messages: int, timeout: float) -> Sequence[Delivery]:
        """Consume up to `max_messages` records, waiting at most `timeout` seconds for the first."""
        async with self._polling:
            if self._consumer is None:
                raise SourceError(f"the source {self.url} is not open")
            with failing(f"consuming from {self.topic} on {self.url}"):
                return await asyncio.to_thread(self._consume, max_messages, timeout)

    def _settle(self, delivery: Delivery) -> None:
        with self._lock:
            if self._closed:
                raise self._refused(f"ack of {delivery.key!r}")
            self._settled(delivery.handle)

    def _settled(self, handle: tuple[TopicPartition, int]) -> None:
        """Mark the record settled, and with `commit=ack` commit its partition when its commit point moved; the
        caller holds the lock. A commit that cannot reach the coordinator does not fail the ack: the record stays
        settled and the next receive commits it first, failing as the outage while the brokers stay away (failing
        the ack would leave the rest of the hub's batch unsettled, holding the commit point until a rebalance)."""
        tp, offset = handle
        point = self._tracker.settle(tp, offset)
        if point is None or self.commit != "ack" or self._offsets.behind:
            return  # with `_behind`, the next receive's catch-up commits this point too
        try:
            self._offsets.commit({tp: (point, self._tracker.horizon(tp))}, strict=True)
        except SourceError as exc:
            self._defer(exc)

    def _defer(self, exc: SourceError) -> None:
        """Leave a failed commit to the next receive when it only could not reach the brokers; raise it otherwise."""
        if not self._offsets.behind:
            raise exc
        log_event(_log, logging.WARNING, "commit-deferred", {"error": str(exc), "then": "the next receive commits it"})

    async def ack(self, delivery: Delivery) -> None:
        """Mark the record settled and commit its partition's commit point when it moved (or at the next receive)."""
        with failing(f"ack of {delivery.key!r} on {self.url}"):
            await asyncio.to_thread(self._settle, delivery)

    def _seek(self, delivery: Delivery, delay: float | None) -> None:
        with self._lock:
            if self._closed:
                raise self._refused(f"nack of {delivery.key!r}")
            self._rewind(delivery.handle, delay)

    def _rewind(self, handle: tuple[TopicPartition, int], delay: float | None) -> None:
        """Seek the record's partition back to it, paused for `delay` seconds; the caller holds the lock."""
        ck = kafka()
        tp, offset = handle
        if not self._tracker.assigned(tp):
            return  # revoked meanwhile: the next owner reads it from the committed offset
        try:
            self._consumer.seek(ck.TopicPartition(tp[0], tp[1], offset))
        except ck.KafkaException as exc:  # the record stays pending: no commit passes it
            raise SourceError(f"seeking back on {self.url} failed: {exc}") from exc
        self._tracker.rewind(tp, offset)
        if delay:
            self._consumer.pause([ck.TopicPartition(tp[0], tp[1])])
            self._paused[tp] = time.monotonic() + delay

    async def nack(self, delivery: Delivery, *, delay: float | None = None) -> None:
        """Seek the partition back to this record (the ones after it come again too), paused for `delay` seconds."""
        with failing(f"nack of {delivery.key!r} on {self.url}"):
            await asyncio.to_thread(self._seek, delivery, delay)

    def _dead_letter(self, delivery: Delivery, reason: str, produced: concurrent.futures.Future[Posted]) -> None:
        """In the dead-letter thread: produce the record to the dead-letter topic, then flush for `commit_wait`
        seconds at most; `produced` gets what became of it (`Posted`), or the SourceError of a source closed meanwhile
        (no producer is created then)."""
        with self._lock:  # `aclose` sets `_closed`, and takes the producer, under it
            if self._closed:
                produced.set_exception(self._refused(f"parking {delivery.key!r} in {self.dead_letter}"))
                return
            try:
                if self._producer is None:
                    settings = producer_settings(self._settings)
                    self._producer = kafka().Producer(
                        {**settings, "bootstrap.servers": self.bootstrap, "logger": self._driver_log}
                    )
            except Exception as exc:
                produced.set_result(Posted(error=failure(exc)))
                return
            producer = self._producer
        record = letter(delivery, reason=reason)
        produce_letter(
            producer, delivery, record, produced, topic=self.topic, url=self.url, dead_letter=self.dead_letter
        )
        # sends at once (a poll would wait out linger.ms first, 5 ms a reject) and serves the delivery reports
        producer.flush(self.commit_wait)

    async def reject(self, delivery: Delivery, *, reason: str) -> str | None:
        """Produce the record to the dead-letter topic with the reason in a header, then settle it; return None, or
        where the payload is when its dead letter is a stand-in without it (or there is none: `payload_at`).

        The dead letter is waited for `commit_wait` seconds at most; when it takes longer (the brokers are down),
        SourceError is raised and it stays in librdkafka's queue: the record is settled by the first receive after
        the broker has it, and until then every receive raises SourceError. A dead letter that fails leaves its
        record unsettled, sought back to be read (and rejected) again; one too large for the producer or the topic
        is produced as a stand-in without its payload instead (`_dead_letter`).
        """
        if self._closed:  # before a thread is started for it (the dead-letter thread checks again, under the lock)
            raise self._refused(f"parking {delivery.key!r} in {self.dead_letter}")
        with failing(f"parking {delivery.key!r} in {self.dead_letter} on {self.url}"):
            produced: concurrent.futures.Future[Posted] = concurrent.futures.Future()
            self._letters.submit(partial(self._dead_letter, delivery, reason, produced))
            await asyncio.wait({asyncio.wrap_future(produced)}, timeout=self.commit_wait)
            if not produced.done():
                self._parking[delivery.handle] = produced
                raise SourceError(
                    f"producing to {self.dead_letter} on {self.url}: no answer from the brokers within "
                    f"{self.commit_wait:g} s (the record is settled once they have it)"
                )
            posted = produced.result()
            if posted.error is not None:
                await asyncio.to_thread(self._seek, delivery, None)
                raise SourceError(f"producing to {self.dead_letter} on {self.url} failed: {posted.error}")
        await self.ack(delivery)
        return posted.kept or None

    async def aclose(self) -> None:
        """Leave the group (never raises): settled records are committed, the others go to the next owner (with
        the dead letters of rejects that failed, dropped)."""
        async with self._polling:
            consumer = self._consumer
            await quietly(f"committing on {self.url}", lambda: asyncio.to_thread(self._leave))
            if consumer is not None:
                # `_consumer` stays set while librdkafka closes: the revoke callback commits with it
                if self._offsets.waiting is not None and not self._offsets.waiting.done():
                    # librdkafka's close waits for that commit (as long as the brokers are down): leave it behind,
                    # in a thread of its own (the commit thread is busy with that commit)
                    closer = Daemon()
                    closing = asyncio.wrap_future(closer.submit(consumer.close))
                    closer.stop()
                    await asyncio.wait({closing}, timeout=self.commit_wait)
                    if not closing.done():
                        fields = {
                            "source": self.url,
                            "then": "left to librdkafka: an offset commit waits for the brokers",
                        }
                        log_event(_log, logging.WARNING, "close-pending", fields)
                    elif closing.exception() is not None:
                        _log.debug("closing %s: %s", self.url, closing.exception())
                else:
                    await quietly(f"closing {self.url}", lambda: asyncio.to_thread(consumer.close))
                self._consumer = None
                self._offsets.daemon.stop()
            producer = await asyncio.to_thread(self._drop_producer)
            self._letters.stop()
            if producer is not None:
                # a reject that returned left nothing queued; what is left belongs to a record left unsettled (its
                # reject failed or was cancelled): read again by the next owner and rejected then, it is dropped
                # here rather than delivered twice
                await quietly(f"dropping dead letters on {self.url}", lambda: asyncio.to_thread(producer.purge))
            self._parking.clear()
        if self._mock is not None:
            self._mock.close()
            self._mock = None


SOURCE = KafkaSource
PUBLISHER = KafkaPublisher


async def publish(url: str, messages: Sequence[tuple[str, bytes] | Outgoing]) -> None:
    """Produce payloads to the URL's topic, the key header (and the record key) set to each producer id."""
    await publish_once(KafkaPublisher(url), messages)
