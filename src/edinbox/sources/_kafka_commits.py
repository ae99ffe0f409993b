"""A Kafka source's offset commits: each in a commit thread of its own, waited for `commit_wait` seconds at most, a
failed one leaving the source behind until a later receive catches up (`KafkaSource`, `edinbox.sources.kafka`)."""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from edinbox._errors import SourceError
from edinbox._logs import log_event
from edinbox.sources._kafka_config import kafka, transient, unreachable
from edinbox.sources._kafka_daemon import Daemon
from edinbox.sources._kafka_offsets import OffsetTracker, TopicPartition

__all__ = ["HORIZON", "Commits"]

_log = logging.getLogger("edinbox.sources.kafka")

HORIZON = "edinbox:delivered="
"""Commit metadata prefix: the highest offset delivered so far, so the next owner flags redeliveries."""


class Commits:
    """A source's offset commits, from its `tracker`, through the consumer `consumer()` gives (None once closed)."""

    def __init__(self, tracker: OffsetTracker, *, url: str, commit_wait: float, consumer: Callable[[], Any]) -> None:
        """Commits for the source at `url` (masked), each waited for `commit_wait` seconds at most."""
        self.tracker = tracker
        self.url = url
        self.commit_wait = commit_wait
        self._consumer = consumer
        self.daemon = Daemon()  # the thread commits run in
        self.waiting: concurrent.futures.Future[None] | None = None  # a commit that outlived `commit_wait`
        self.behind = False  # settled offsets a failed commit left uncommitted: receives commit them first

    def commit(self, points: Mapping[TopicPartition, tuple[int, int]], *, strict: bool = False) -> None:
        """Commit `{partition: (offset, horizon)}`, waiting `commit_wait` seconds at most; the caller holds the lock.

        A commit that fails because the group is rebalancing (or its coordinator moved) is only logged: the records
        stay settled here, the next commit (a later ack, the revoke) covers them, and at worst they are redelivered
        and found settled by the inbox. A commit that cannot reach the coordinator (the brokers are down) leaves the
        source behind (`catch_up`). With `strict`, that failure and any other but a group change raise SourceError.
        """
        if not points:
            return
        ck = kafka()
        offsets = [ck.TopicPartition(t, p, o, metadata=f"{HORIZON}{h}") for (t, p), (o, h) in points.items()]
        try:
            self._within(offsets)
        except ck.KafkaException as exc:
            error = exc.args[0] if exc.args else None
            down = unreachable(ck, error)
            self.behind = self.behind or down
            if strict and (down or not transient(ck, error)):
                raise SourceError(f"offset commit failed on {self.url}: {exc}") from exc
            fields = {"source": self.url, "error": str(exc), "then": "a later commit covers it"}
            log_event(_log, logging.WARNING, "commit-failed", fields)
            return
        except SourceError as exc:
            self.behind = True
            if strict:
                raise
            log_event(_log, logging.WARNING, "commit-failed", {"error": str(exc), "then": "a later commit covers it"})
            return
        for tp, (offset, _) in points.items():
            self.tracker.committed(tp, offset)

    def _within(self, offsets: list[Any]) -> None:
        """librdkafka's synchronous commit in the source's commit thread (a daemon: it never holds up the process's
        exit), waited for `commit_wait` seconds; SourceError when it outlives them (it goes on, as `waiting`) or
        when an earlier one still waits."""
        if self.waiting is not None and not self.waiting.done():
            raise SourceError(f"an offset commit on {self.url} still waits for the group coordinator")
        self.waiting = None
        consumer = self._consumer()
        if consumer is None:  # a rebalance callback of a close left behind (see `aclose`)
            raise SourceError(f"offset commit on {self.url} failed: the source is closed")
        done = self.daemon.submit(lambda: consumer.commit(offsets=offsets, asynchronous=False))
        try:
            done.result(timeout=self.commit_wait)
        except concurrent.futures.TimeoutError:
            self.waiting = done
            raise SourceError(
                f"offset commit on {self.url}: no answer from the group coordinator within {self.commit_wait:g} s"
            ) from None

    def catch_up(self, deadline: float) -> None:
        """Wait (until the monotonic `deadline`) for the commit left waiting, then commit what is settled when a
        failed commit left the source behind; SourceError while the group coordinator cannot be reached. The caller
        holds the source's lock."""
        waiting = self.waiting
        if waiting is not None:
            try:
                waiting.exception(timeout=max(deadline - time.monotonic(), 0.0))  # a failure leaves the offsets due
            except concurrent.futures.TimeoutError:
                raise SourceError(f"an offset commit on {self.url} still waits for the group coordinator") from None
            self.waiting = None
        if self.behind:
            self.behind = False
            self.commit({tp: (o, self.tracker.horizon(tp)) for tp, o in self.tracker.due().items()}, strict=True)
