"""Producing a Kafka source's dead letter (`KafkaSource.reject`): the record whole, or its stand-in without the payload
when the producer or the topic refuses it as too large (`edinbox.sources._kafka_letters`)."""

from __future__ import annotations

import concurrent.futures
import logging
from functools import partial
from typing import Any

from edinbox._logs import log_event
from edinbox.sources._base import Delivery
from edinbox.sources._failures import reason as failure
from edinbox.sources._kafka_config import kafka
from edinbox.sources._kafka_letters import Letter, Posted, payload_at, stand_in, too_large

__all__ = ["produce_letter"]

_log = logging.getLogger("edinbox.sources.kafka")


def produce_letter(
    producer: Any,
    delivery: Delivery,
    record: Letter,
    produced: concurrent.futures.Future[Posted],
    *,
    topic: str,
    url: str,
    dead_letter: str,
) -> None:
    """Produce one dead-letter record; a whole one refused as too large (by the producer at once, or by the
    broker in its delivery report) is replaced by its stand-in, which no retry could change. `produced` gets
    `Posted()` once the broker has the record, `Posted(kept=...)` when it is a stand-in, else why not; a stand-in
    refused as too large too (headers over the limit) parks the record without a dead letter, in one error line
    saying where it is."""
    ck = kafka()
    where = partial(payload_at, delivery, topic=topic, url=url, dead_letter=dead_letter)

    def refused(error: Any) -> None:
        if record.whole:
            fields = {
                "delivery": delivery.coordinates,
                "dead_letter": dead_letter,
                "bytes": len(delivery.payload),
                "error": str(error),
                "kept_in": topic,
                "then": "its dead letter carries the reason and where the record is, not the payload, which the "
                "topic keeps until its retention removes it",
            }
            log_event(_log, logging.WARNING, "dead-letter-refused", fields)
            reason = dict(record.headers)["edinbox-reason"]
            substitute = stand_in(delivery, reason=reason, refused=str(error))
            produce_letter(producer, delivery, substitute, produced, topic=topic, url=url, dead_letter=dead_letter)
            return
        fields = {
            "delivery": delivery.coordinates,
            "dead_letter": dead_letter,
            "error": str(error),
            "kept_in": topic,
            "then": "parked without a dead letter (even its stand-in was refused): the record is only in the "
            "topic, until its retention removes it",
        }
        log_event(_log, logging.ERROR, "dead-letter-lost", fields)
        if not produced.done():
            produced.set_result(Posted(kept=where(stand_in=False)))

    def report(err: Any, _msg: Any) -> None:
        if too_large(ck, err):
            refused(err)
        elif not produced.done():
            kept = "" if record.whole else where(stand_in=True)
            produced.set_result(Posted(kept=kept) if err is None else Posted(error=str(err)))

    try:
        producer.produce(dead_letter, value=record.value, key=record.key, headers=record.headers, on_delivery=report)
    except ck.KafkaException as exc:  # refused before sending: no report comes
        if too_large(ck, exc.args[0] if exc.args else None):
            refused(exc.args[0])
        else:
            produced.set_result(Posted(error=failure(exc)))
    except Exception as exc:  # a full queue: no report comes
        produced.set_result(Posted(error=failure(exc)))
