"""The relay: sends the outbox's committed rows to their destinations, marks them sent, and waits for more.

It runs as `edinbox relay`, beside a consumer loop (`AsyncConsumer(relay=True)`) and, by default, beside the hub in
`edinbox run`. Each pass is `AsyncInbox.relay` with
the sources' own publishers (`edinbox.sources.publisher`: the spool folder, RabbitMQ with publisher confirms, NATS
JetStream acks, Redis Streams, Kafka deliveries), the outbox key as the producer id. A row that can never be sent
(a destination URL that names no broker, a payload the broker refuses) is parked with its reason, in one log line;
a broker or database outage leaves the rows unsent and is waited out with backoff (`Outage`). Between passes the
relay waits for a commit that published (LISTEN/NOTIFY on PostgreSQL) or `idle` seconds. The publishers stay open
from pass to pass, one per destination (`Publishers`), closed after a failure, when idle, and when the relay stops.
A failure of a send that is not one of edinbox's errors is taken as transient (a SourceError): the relay never
stops on a destination's failure.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence
from typing import Protocol

from edinbox._async_inbox import AsyncInbox
from edinbox._errors import InboxError, SourceError
from edinbox._logs import LOGGER, log_event
from edinbox._message import Outgoing
from edinbox._outbox import SendResult
from edinbox._urls import mask
from edinbox.loop._outage import Outage, Stopped, unless_stopped
from edinbox.loop._publishers import Publishers
from edinbox.sources import publisher

__all__ = ["Relay", "SendFault", "send"]


class SendFault(Protocol):
    """A fault point told of each confirmed send (the hub's `after_send:N` kills the process there)."""

    def sent(self) -> None:
        """One send was confirmed, before its rows are marked sent."""


async def send(destination: str, messages: Sequence[Outgoing]) -> None:
    """Publish messages to the broker or spool `destination` names, each key as the producer id, on a connection
    opened and closed for this call (the relay keeps its own open instead)."""
    await publisher(destination)(destination, messages)


class Relay:
    """Moves the outbox of one journal to its destinations until `stop` is set."""

    def __init__(
        self,
        inbox: AsyncInbox,
        *,
        outage: Outage,
        stop: asyncio.Event,
        limit: int = 100,
        idle: float = 5.0,
        fault: SendFault | None = None,
        keep_open: float = 60.0,
        linger: float = 0.1,
        logger: logging.Logger | None = None,
        destinations: Sequence[str] = (),
    ) -> None:
        """Relay `inbox`'s outbox, `limit` rows per pass, waiting at most `idle` seconds between idle passes;
        `fault` (after_send:N) kills the process after a send, before its rows are marked sent; a destination's
        publisher unused for `keep_open` seconds is closed; woken by `wake`, or after a pass that sent fewer than
        `limit` rows (but not with `once`), it waits `linger` seconds more before its next pass, so the rows of the
        next few commits go in the same pass (fewer passes, each flushing more at once, and fewer marks); its lines
        go to `logger` (the `edinbox.loop` logger when None); `destinations` are the full URLs that give the rows their
        passwords (`AsyncInbox.relay`)."""
        self.destinations = tuple(destinations)
        self.inbox = inbox
        self.outage = outage
        self.stop = stop
        self.limit = limit
        self.idle = idle
        self.fault = fault
        self.totals: Counter[str] = Counter()
        self.publishers = Publishers(keep_open=keep_open)
        self.linger = linger
        self._woken = asyncio.Event()
        self._wait_failed = False
        """The last wait for a commit failed: logged once until a wait works again; meanwhile each waits `idle`."""
        self.logger = logger or logging.getLogger(LOGGER)

    async def run(self, *, once: bool = False) -> Counter[str]:
        """Pass after pass until `stop` is set or, with `once`, until a pass finds nothing to send; the publishers are
        closed at the end."""
        try:
            while not self.stop.is_set():
                try:
                    result = await self.outage.call(self.step, stop=self.stop)
                except Stopped:
                    break
                if result.busy:
                    if not once and result.sent + len(result.parked) < self.limit:  # the next rows gather first
                        await unless_stopped(asyncio.sleep(self.linger), self.stop)
                    continue
                if once:
                    break
                await self.publishers.close_idle()
                await self._wait()
        finally:
            await self.publishers.aclose()
        return self.totals

    async def step(self) -> SendResult:
        """One pass; a transient failure of a send is raised (after what did settle was marked) for the backoff."""
        result = await self.inbox.relay(self._send, limit=self.limit, destinations=self.destinations)
        self.totals["sent"] += result.sent
        self.totals["parked"] += len(result.parked)
        for key, reason in result.parked:
            fields = {"key": key, "reason": reason}
            log_event(self.logger, logging.WARNING, "outbox-parked", fields)
        if isinstance(result.error, InboxError):
            raise result.error
        if result.error is not None:  # a driver's own exception that escaped its source's mapping: transient
            line = " ".join(f"{type(result.error).__name__}: {result.error}".split())[:300]
            raise SourceError(f"sending the outbox failed: {mask(line)}") from result.error
        return result

    async def _send(self, destination: str, messages: Sequence[Outgoing]) -> None:
        await self.publishers.send(destination, messages)
        if self.fault is not None:
            self.fault.sent()

    def wake(self) -> None:
        """Run the next pass now: a commit in this process published (the hub's relay; on SQLite and MariaDB, which
        cannot notify, the relay would otherwise sleep until `idle`)."""
        self._woken.set()

    async def _wait(self) -> None:
        """Wait for a commit that published (`wake`, or the database's notification), `idle` seconds, or `stop`,
        whichever comes first; woken, wait `linger` seconds more for the next batches' rows to join the pass. A wait
        that fails (its listening connection refused, the database down) is logged once (`relay-wait-failed`) and
        replaced by a plain wait of `idle` seconds: the passes go on at that pace, never one right after another."""
        try:
            await unless_stopped(unless_stopped(self.inbox.wait_outbox(self.idle), self._woken), self.stop)
            self._wait_failed = False
        except Exception as exc:  # a database outage the next pass meets; or only the wait's connection refused
            if not self._wait_failed:
                fields = {"error": " ".join(f"{type(exc).__name__}: {exc}".split())[:300], "polling_s": self.idle}
                log_event(self.logger, logging.WARNING, "relay-wait-failed", fields)
            self._wait_failed = True
            await unless_stopped(unless_stopped(asyncio.sleep(self.idle), self._woken), self.stop)
        if self._woken.is_set():
            await unless_stopped(asyncio.sleep(self.linger), self.stop)
        self._woken.clear()
