"""Prometheus instruments for an inbox or a hub: what settled, how fast, and how the journal stands.

```python
from edinbox.metrics import Metrics

metrics = Metrics(partners=["ZZ:ACME"])   # its own registry; Metrics(registry=prometheus_client.REGISTRY) to share
outcome = inbox.process(message, handler)
metrics.settled(outcome.value, consumer="accounting", partner="ZZ:ACME", message_type="INVOIC")
await metrics.refresh(async_inbox)        # journal rows by status and the oldest row's age, as gauges
metrics.serve(9464)                       # GET /metrics on 127.0.0.1:9464
```

Names follow Prometheus conventions: counters end in `_total`, durations are `_seconds`. prometheus-client is the
`metrics` extra; without it, `Metrics()` raises ConfigurationError saying what to install.

Every label has a bounded set of values, whatever the traffic: `partner` and `message_type` come from the
partners' headers, so only the partners named in `partners` (the hub: its `[partners]` agreements) and the types
in `message_types` (MESSAGE_TYPES, plus the hub's `[routes]`) are labels of their own; any other is `other` ("" is
kept: a delivery that is not an interchange). `edinbox_messages_settled_total` thus has at most consumers x
outcomes x (partners + 2) x (types + 2) series. `/metrics` has no authentication: `serve` binds loopback unless
`public=True`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Protocol

from edinbox._core import Status
from edinbox._errors import ConfigurationError
from edinbox._hosts import is_loopback

__all__ = ["AGED", "MESSAGE_TYPES", "OTHER", "Metrics"]

MESSAGE_TYPES = frozenset({"INVOIC", "810", "997", "999", "TA1", "CONTRL", "APERAK"})
"""The message types that are `message_type` labels of their own by default: invoices and acknowledgments."""

OTHER = "other"
"""The label of every partner and message type not named when the instruments were created."""

AGED = ("failed", "in_progress", "dead")
"""The journal statuses whose oldest row's age is a gauge (a row stuck there needs an operator)."""

_BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


class _Journal(Protocol):
    """What `refresh` reads: an AsyncInbox (or anything with its `stats` and `oldest`)."""

    consumer: str

    async def stats(self) -> Any:
        """Rows by status."""

    async def oldest(self) -> dict[str, datetime]:
        """Oldest row per status."""


class Metrics:
    """The instruments of one process, registered in `registry` (a new CollectorRegistry when None)."""

    def __init__(
        self, registry: Any = None, *, partners: Iterable[str] = (), message_types: Iterable[str] = MESSAGE_TYPES
    ) -> None:
        """Create every instrument, with `partners` and `message_types` as the only values of those labels besides
        `other`; ConfigurationError when prometheus-client is not installed."""
        self.partners = frozenset(partners)
        self.message_types = frozenset(t.upper() for t in message_types)
        try:
            import prometheus_client as prom
        except ImportError as exc:
            raise ConfigurationError("metrics need prometheus-client: pip install 'edinbox[metrics]'") from exc
        self._prom = prom
        self.registry = prom.CollectorRegistry() if registry is None else registry
        reg = self.registry
        self.messages_settled = prom.Counter(
            "edinbox_messages_settled_total",
            "Deliveries settled, by consumer, outcome, partner (the interchange's sender if configured, else other)"
            " and message type (if known, else other).",
            ["consumer", "outcome", "partner", "message_type"],
            registry=reg,
        )
        self.settle_seconds = prom.Histogram(
            "edinbox_settle_duration_seconds",
            "Seconds from receiving a batch to its commit.",
            ["consumer"],
            registry=reg,
        )
        self.batch_size = prom.Histogram(
            "edinbox_batch_size", "Deliveries per settled batch.", ["consumer"], buckets=_BATCH_BUCKETS, registry=reg
        )
        self.journal_rows = prom.Gauge(
            "edinbox_journal_rows", "Journal rows by status, at the last refresh.", ["consumer", "status"], registry=reg
        )
        self.oldest_age = prom.Gauge(
            "edinbox_oldest_row_age_seconds",
            "Age of the oldest journal row of a status: failed, in_progress, dead (0 when none).",
            ["consumer", "status"],
            registry=reg,
        )
        self.purge_runs = prom.Counter("edinbox_purge_runs_total", "Purges run.", ["consumer"], registry=reg)
        self.purged_rows = prom.Counter("edinbox_purged_rows_total", "Journal rows purged.", ["consumer"], registry=reg)
        self.reconnects = prom.Counter(
            "edinbox_source_reconnects_total",
            "Outages of a dependency (database or source) that ended: the connection came back.",
            ["consumer", "dependency"],
            registry=reg,
        )
        self.queues_lost = prom.Counter(
            "edinbox_source_queues_lost_total",
            "Source queues found gone or deleted under the consumer, then declared again: the messages they held may"
            " be lost.",
            ["consumer", "queue"],
            registry=reg,
        )
        self._hub_instruments(prom, reg)

    def _hub_instruments(self, prom: Any, reg: Any) -> None:
        """The hub's own instruments: partners refused, the ledger's gaps and duplicates, the relay's restarts."""
        self.unknown_partners = prom.Counter(
            "edinbox_unknown_partners_total",
            "Interchanges refused for their parties, by consumer, partner (the sender if configured, else other) and"
            " side (sender: no agreement; receiver: not this hub).",
            ["consumer", "partner", "side"],
            registry=reg,
        )
        self.ledger_gaps = prom.Gauge(
            "edinbox_ledger_open_gaps",
            "Open gaps (missing ranges) in the control numbers partners sent, by consumer, partner (if configured, else"
            " other) and level (ISA13, GS06, ST02, UNB0020, UNG0048, UNH0062), at the last refresh.",
            ["consumer", "partner", "level"],
            registry=reg,
        )
        self.ledger_duplicates = prom.Gauge(
            "edinbox_ledger_duplicates",
            "Control numbers sent again within the duplicate window, by consumer, partner and level, at the last"
            " refresh.",
            ["consumer", "partner", "level"],
            registry=reg,
        )
        self._ledger_series: set[tuple[str, str, str]] = set()
        self.relay_restarts = prom.Counter(
            "edinbox_relay_restarts_total",
            "Relay processes of `edinbox run` that died and are started again.",
            ["consumer"],
            registry=reg,
        )

    def ledger(self, *, consumer: str, found: Iterable[tuple[str, str, int, int]]) -> None:
        """Set the control-number ledger's gauges from `found` (partner, level, open gaps, duplicates), a whole ledger
        at a time: a partner not named at creation is summed into `other`, and a series not in `found` goes to 0."""
        gaps: dict[tuple[str, str, str], int] = {}
        duplicates: dict[tuple[str, str, str], int] = {}
        for partner, level, open_gaps, copies in found:
            labels = (consumer, partner if partner in self.partners else OTHER, level)
            gaps[labels] = gaps.get(labels, 0) + open_gaps
            duplicates[labels] = duplicates.get(labels, 0) + copies
        for labels in self._ledger_series - gaps.keys():
            self.ledger_gaps.labels(*labels).set(0)
            self.ledger_duplicates.labels(*labels).set(0)
        for labels, n in gaps.items():
            self.ledger_gaps.labels(*labels).set(n)
            self.ledger_duplicates.labels(*labels).set(duplicates[labels])
        self._ledger_series |= gaps.keys()

    def settled(self, outcome: str, *, consumer: str, partner: str = "", message_type: str = "", n: int = 1) -> None:
        """Count `n` deliveries settled with `outcome` (processed, duplicate, conflict, dead, rejected, ...); a partner
        or message type not named at creation is counted as `other`."""
        partner = partner if not partner or partner in self.partners else OTHER
        kind = message_type.upper()
        message_type = kind if not kind or kind in self.message_types else OTHER
        self.messages_settled.labels(consumer, outcome, partner, message_type).inc(n)

    def unknown_partner(self, *, consumer: str, partner: str, side: str) -> None:
        """Count one interchange refused for its parties (`side`: "sender" or "receiver"); a partner not named at
        creation is counted as `other`."""
        partner = partner if partner in self.partners else OTHER
        self.unknown_partners.labels(consumer, partner, side).inc()

    def batch(self, *, consumer: str, size: int, seconds: float) -> None:
        """Observe one settled batch: how many deliveries, how long from receive to commit."""
        self.batch_size.labels(consumer).observe(size)
        self.settle_seconds.labels(consumer).observe(seconds)

    def purged(self, *, consumer: str, rows: int) -> None:
        """Count one purge run and the rows it deleted."""
        self.purge_runs.labels(consumer).inc()
        self.purged_rows.labels(consumer).inc(rows)

    def reconnected(self, *, consumer: str, dependency: str) -> None:
        """Count a dependency that came back after an outage."""
        self.reconnects.labels(consumer, dependency).inc()

    def queue_lost(self, *, consumer: str, queue: str) -> None:
        """Count a source queue found gone or deleted under the consumer (the messages it held may be lost)."""
        self.queues_lost.labels(consumer, queue).inc()

    def relay_restarted(self, *, consumer: str) -> None:
        """Count a relay process that died and is started again."""
        self.relay_restarts.labels(consumer).inc()

    async def refresh(self, journal: _Journal, *, now: datetime | None = None) -> None:
        """Set the journal gauges from the database: rows by status, the oldest failed / in-progress / dead row."""
        consumer = journal.consumer
        counts = await journal.stats()
        for status in (status.value for status in Status):
            self.journal_rows.labels(consumer, status).set(int(getattr(counts, status)))
        oldest = await journal.oldest()
        at = now or datetime.now(UTC)
        for status in AGED:
            when = oldest.get(status)
            self.oldest_age.labels(consumer, status).set(0.0 if when is None else max(0.0, (at - when).total_seconds()))

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format (what GET /metrics answers)."""
        return bytes(self._prom.generate_latest(self.registry))

    def serve(self, port: int, *, host: str = "127.0.0.1", public: bool = False) -> Any:
        """Serve GET /metrics on `host:port` from a daemon thread; return the server (call `shutdown()` to stop).

        /metrics has no authentication: a `host` beyond loopback (0.0.0.0, a network address) is a
        ConfigurationError unless `public` is true.
        """
        if not public and not is_loopback(host):
            raise ConfigurationError(
                f"/metrics on {host} would be open to the network with no authentication: bind 127.0.0.1, or allow"
                " it deliberately with --metrics-public (metrics_public = true)"
            )
        server, _thread = self._prom.start_http_server(port, addr=host, registry=self.registry)
        return server
