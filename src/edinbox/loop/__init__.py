"""The consumer loop: deliveries from a source, through the inbox, acked after the commit, waiting out outages.

`AsyncConsumer(source_url, handler, db=...)` runs a handler `handler(tx, message)` for every new message a source
delivers (spool folder, RabbitMQ, NATS JetStream, Redis Streams, Kafka), in batches, each message's failure charged to
it alone; `consume(...)` is its blocking face, stopped by SIGTERM or Ctrl-C. Its parts serve the hub too: `Outage`
(backoff through outages of the database and the broker), `progress` (heartbeats for a long batch), `Relay` (the
outbox beside the loop), `drive` (the loop itself, around one step).
"""

from edinbox._logs import LOGGER, Event, EventFormatter, format_line, log_event, settled, visible
from edinbox.loop._consume import consume
from edinbox.loop._consumer import AsyncConsumer
from edinbox.loop._drive import Stepper, beside, drive, reached, wait_beside
from edinbox.loop._gauges import Gauges
from edinbox.loop._hand_back import (
    ACK,
    NACK_DELAY,
    HandBack,
    Verdict,
    hand_back,
    hand_back_each,
    nack_each,
    not_the_message,
    verdict,
)
from edinbox.loop._index import Indexer
from edinbox.loop._journal import Handler
from edinbox.loop._lifecycle import FINAL, TRANSITIONS, Lifecycle, LifecycleError, Move, Stage, move_all
from edinbox.loop._outage import Outage, Stopped, dependency, unless_stopped
from edinbox.loop._outcome import HANDLED, DeliveryOutcome
from edinbox.loop._progress import progress
from edinbox.loop._publishers import Publishers
from edinbox.loop._relay import Relay, SendFault, send

__all__ = [
    "ACK",
    "FINAL",
    "HANDLED",
    "LOGGER",
    "NACK_DELAY",
    "TRANSITIONS",
    "AsyncConsumer",
    "DeliveryOutcome",
    "Event",
    "EventFormatter",
    "Gauges",
    "HandBack",
    "Handler",
    "Indexer",
    "Lifecycle",
    "LifecycleError",
    "Move",
    "Outage",
    "Publishers",
    "Relay",
    "SendFault",
    "Stage",
    "Stepper",
    "Stopped",
    "Verdict",
    "beside",
    "consume",
    "dependency",
    "drive",
    "format_line",
    "hand_back",
    "hand_back_each",
    "log_event",
    "move_all",
    "nack_each",
    "not_the_message",
    "progress",
    "reached",
    "send",
    "settled",
    "unless_stopped",
    "verdict",
    "visible",
    "wait_beside",
]
