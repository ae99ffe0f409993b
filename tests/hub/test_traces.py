"""OpenTelemetry spans recorded by the SDK's in-memory exporter: the inbox, the hub, and the FastStream middleware."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from edinbox import Inbox, Message, Outcome
from edinbox.cli import main
from edinbox.hub import HubConfig, open_hub
from edinbox.hub.demo._traffic import PARTNERS, Doc, render
from edinbox.sources.spool import publish
from services import require_service

_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The in-memory exporter behind the global tracer provider (installed once per process), emptied per test."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def children(finished: list[ReadableSpan], parent: ReadableSpan) -> list[str]:
    """Names of the spans whose parent is `parent`, sorted."""
    ctx = parent.get_span_context()
    return sorted(s.name for s in finished if s.parent is not None and s.parent.span_id == ctx.span_id)


def _cli(*args: str) -> Result:
    """Run a command in-process with click's runner."""
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def settles(finished: list[ReadableSpan]) -> list[ReadableSpan]:
    """The `edinbox settle` spans."""
    return [s for s in finished if s.name == "edinbox settle"]


def test_inbox_process_is_one_span_with_handler_and_commit_children(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    """A new message: settle span (key, outcome processed, attempt 1) over handler and commit; a copy: duplicate."""
    with Inbox(f"sqlite:///{tmp_path / 'i.db'}", consumer="c") as inbox:
        inbox.create_schema()
        message = Message("905", "X12:ZZ:ACME>ZZ:HUB", b"x")
        assert inbox.process(message, lambda tx, m: None) is Outcome.PROCESSED
        assert inbox.process(message, lambda tx, m: None) is Outcome.DUPLICATE
    first, second = settles(list(spans.get_finished_spans()))
    finished = list(spans.get_finished_spans())
    assert first.attributes is not None
    assert second.attributes is not None
    assert dict(first.attributes) == {
        "edinbox.key": "X12:ZZ:ACME>ZZ:HUB/905",
        "edinbox.consumer": "c",
        "edinbox.attempt": 1,
        "edinbox.outcome": "processed",
    }
    assert children(finished, first) == ["edinbox commit", "edinbox handler"]
    assert (second.attributes["edinbox.outcome"], second.attributes["edinbox.attempt"]) == ("duplicate", 1)
    assert children(finished, second) == ["edinbox commit"]


def test_a_failing_handler_is_recorded_on_its_span(spans: InMemorySpanExporter, tmp_path: Path) -> None:
    """The handler's exception marks the handler span and the settle span as errors; the retry is attempt 2."""

    def fail(tx: Any, message: Message) -> None:
        raise RuntimeError("accounting said no")

    with Inbox(f"sqlite:///{tmp_path / 'i.db'}", consumer="c") as inbox:
        inbox.create_schema()
        message = Message("906", "X12:ZZ:ACME>ZZ:HUB", b"x")
        with pytest.raises(RuntimeError):
            inbox.process(message, fail)
        inbox.process(message, lambda tx, m: None)
    failed, retried = settles(list(spans.get_finished_spans()))
    assert not failed.status.is_ok
    assert any(event.name == "exception" for event in failed.events)
    assert retried.attributes is not None
    assert (retried.attributes["edinbox.attempt"], retried.attributes["edinbox.outcome"]) == (2, "processed")


def _traceparent(context: Any) -> str:
    """The W3C traceparent of a span context."""
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def test_a_batch_keeps_the_trace_of_the_span_that_settled_each_message(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    """process_batch keeps the current span's traceparent on each row it settles, as process does; `spans=` gives
    each message its own: its row keeps that span's traceparent, a duplicate's span is linked to the span that made
    the effect, and a message settled alone after the batch's handler failed gets a settle span under its own."""
    source = "X12:ZZ:ACME>ZZ:HUB"
    tracer = trace.get_tracer("consumer")

    def fail_on_p(tx: Any, messages: list[Message]) -> None:
        if any(m.message_id == "p" for m in messages):
            raise RuntimeError("accounting said no")

    with Inbox(f"sqlite:///{tmp_path / 'i.db'}", consumer="c") as inbox:
        inbox.create_schema()
        with tracer.start_as_current_span("batch") as current:
            inbox.process_batch([Message("b1", source), Message("b2", source)], fail_on_p)
        given = [tracer.start_span(f"delivery {n}") for n in range(5)]
        batch = [Message("c1", source), Message("c2", source)]
        assert inbox.process_batch(batch, fail_on_p, spans=given[:2]) == [Outcome.PROCESSED] * 2
        pair = [Message("i", source), Message("p", source)]
        assert inbox.process_batch(pair, fail_on_p, spans=given[2:4], isolate=True)[0] is Outcome.PROCESSED
        assert inbox.process_batch([batch[0]], fail_on_p, spans=given[4:]) == [Outcome.DUPLICATE]
        kept = {m: inbox.get(source, m).trace for m in ("b1", "b2", "c1", "c2", "i")}  # type: ignore[union-attr]
    assert kept["b1"] == kept["b2"] == _traceparent(current.get_span_context())
    assert (kept["c1"], kept["c2"]) == tuple(_traceparent(s.get_span_context()) for s in given[:2])
    (link,) = given[4].links
    original = given[0].get_span_context()
    assert (link.context.trace_id, link.context.span_id) == (original.trace_id, original.span_id)
    (alone,) = [
        s for s in settles(list(spans.get_finished_spans())) if "/i" in str((s.attributes or {})["edinbox.key"])
    ]
    assert kept["i"] == _traceparent(alone.context)
    assert alone.parent is not None
    assert alone.parent.span_id == given[2].get_span_context().span_id


def test_hub_traces_each_delivery_with_partner_and_outcome(
    spans: InMemorySpanExporter, hub_config: HubConfig, spool: Path
) -> None:
    """Every delivery of a hub run is one settle span naming its partner; only processed ones have a handler span;
    the journal row keeps the processed delivery's span, and a later re-send's duplicate span links to it."""
    acme = PARTNERS[0]
    doc = Doc(acme, "000000301", "invoice", "INV-301", lines=((1, Decimal("9.50")),))
    payload = render(doc)
    asyncio.run(publish(hub_config.source, [("a", payload), ("b", payload)]))

    async def drain() -> None:
        async with open_hub(hub_config) as hub:
            await hub.run(once=True)

    asyncio.run(drain())
    asyncio.run(publish(hub_config.source, [("c", payload)]))  # re-sent later: a duplicate of a journaled row
    asyncio.run(drain())
    finished = list(spans.get_finished_spans())
    found = sorted(
        (dict(s.attributes or {}) for s in settles(finished) if (s.attributes or {}).get("edinbox.partner")),
        key=lambda a: str(a["edinbox.outcome"]),
    )
    assert [a["edinbox.outcome"] for a in found] == ["duplicate", "duplicate", "processed"]
    assert {a["edinbox.partner"] for a in found} == {f"{acme.qualifier}:{acme.id}"}
    assert {a["edinbox.message_type"] for a in found} == {"810" if acme.standard == "X12" else "INVOIC"}
    by_outcome = {
        s.attributes["edinbox.outcome"]: children(finished, s)
        for s in settles(finished)
        if s.attributes and s.attributes.get("edinbox.partner")
    }
    assert by_outcome == {"processed": ["edinbox commit", "edinbox handler"], "duplicate": ["edinbox commit"]}
    (processed,) = [s for s in settles(finished) if (s.attributes or {}).get("edinbox.outcome") == "processed"]
    with Inbox(hub_config.db, consumer=hub_config.consumer, table=hub_config.table) as inbox:
        (row,) = inbox.records(limit=10)
    assert row.trace == _traceparent(processed.context)  # the batch's row keeps its delivery's span
    linked = [s for s in settles(finished) if s.links]  # the copy in the first batch had no row to link to
    assert [(s.attributes or {}).get("edinbox.outcome") for s in linked] == ["duplicate"]
    assert linked[0].links[0].context.span_id == processed.context.span_id


async def test_faststream_middleware_continues_the_producers_trace(
    spans: InMemorySpanExporter, tmp_path: Path, unique_name: str
) -> None:
    """A publish carrying the producer's traceparent header: the inbox's settle span is a child of the producer's."""
    require_service("rabbitmq")
    from faststream.rabbit import RabbitBroker, RabbitQueue

    from edinbox import AsyncInbox
    from edinbox.integrations.faststream import inbox_middleware

    inbox = AsyncInbox(f"sqlite:///{tmp_path / 'f.db'}", consumer="accounting")
    await inbox.create_schema()
    done = asyncio.Event()
    broker = RabbitBroker(
        "amqp://guest:guest@127.0.0.1:5672/",
        middlewares=[inbox_middleware(inbox, on_outcome=lambda *_: done.set())],
        logger=None,
    )

    @broker.subscriber(RabbitQueue(unique_name, auto_delete=True))
    async def handle(body: bytes) -> None:
        """Nothing to do: the span is what the test looks at."""

    tracer = trace.get_tracer("producer")
    try:
        async with broker:
            await broker.start()
            with tracer.start_as_current_span("publish invoice") as producer:
                headers: dict[str, str] = {}
                propagate.inject(headers)
                await broker.publish(b"inv", queue=unique_name, message_id="p-1", headers=headers)
            await asyncio.wait_for(done.wait(), timeout=10)
    finally:
        await inbox.aclose()
    (settle,) = [s for s in settles(list(spans.get_finished_spans())) if s.attributes and "p-1" in str(s.attributes)]
    assert settle.context.trace_id == producer.get_span_context().trace_id
    assert settle.parent is not None
    assert settle.parent.span_id == producer.get_span_context().span_id


def test_spans_cost_nothing_until_the_application_sets_a_tracer_provider() -> None:
    """In a fresh process with the API but no provider, span() yields None and note() does nothing (no-op spans
    cost about 100 us a delivery); once the application sets a provider, spans are recorded."""
    code = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from edinbox import _trace
assert not _trace.tracing()
with _trace.span(_trace.SETTLE, {"edinbox.key": "s/1"}) as nothing:
    assert nothing is None
    _trace.note(outcome="processed")
trace.set_tracer_provider(TracerProvider())
assert _trace.tracing()
with _trace.span(_trace.SETTLE) as recorded:
    assert recorded.is_recording()
"""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    environment["PYTHONPATH"] = os.pathsep.join(sys.path)
    subprocess.run([sys.executable, "-c", code], check=True, env=environment, timeout=60)


async def _publish_in_span(broker: Any, tracer: trace.Tracer, name: str, queue: str) -> trace.Span:
    """Publish the invoice `t-1` to `queue` inside a new span `name`, its context in the message's headers; that
    span (ended)."""
    with tracer.start_as_current_span(name) as span:
        headers: dict[str, str] = {}
        propagate.inject(headers)
        await broker.publish(b"inv", queue=queue, message_id="t-1", headers=headers)
    return span


async def _delete_queues(amqp: str, *names: str) -> None:
    """Delete the RabbitMQ queues `names` (those a test declared to outlive its connections)."""
    import aio_pika

    connection = await aio_pika.connect(amqp)
    channel = await connection.channel()
    for name in names:
        await channel.queue_delete(name)
    await connection.close()


def _first_settles(finished: list[ReadableSpan]) -> dict[str, ReadableSpan]:
    """Each consumer's first settle span among `finished`, by consumer name."""
    by_consumer: dict[str, ReadableSpan] = {}
    for settle in settles(finished):
        by_consumer.setdefault(str((settle.attributes or {}).get("edinbox.consumer")), settle)
    return by_consumer


async def _shown_trace(db: Path, consumer: str) -> str:
    """The traceparent `show --json` prints for the one row of the SQLite journal `db` of `consumer`."""
    args = ("--db", f"sqlite:///{db}", "--consumer", consumer)
    (row,) = json.loads((await asyncio.to_thread(_cli, "list", *args, "--json")).output)  # the CLI runs its own loop
    shown = (await asyncio.to_thread(_cli, "show", *args, row["key"], "--json")).output
    return str(json.loads(shown)["trace"])


async def test_a_trace_crosses_the_broker_from_producer_through_the_relay_to_the_next_consumer(
    spans: InMemorySpanExporter, tmp_path: Path, unique_name: str
) -> None:
    """Producer -> RabbitMQ -> consumer A, whose reply goes through the outbox (the row keeps the publishing
    transaction's traceparent) -> the relay -> RabbitMQ -> consumer B: B's settle span has the producer's trace id
    and is a child of the span of A's handler that published the reply. A's journal keeps the traceparent of the
    settle span that processed the message (`show --json` prints it), and a second delivery of it to A, suppressed
    as a duplicate, has a span linked to that settle span."""
    require_service("rabbitmq")
    from faststream.rabbit import RabbitBroker, RabbitQueue

    from edinbox import AsyncInbox
    from edinbox.integrations.faststream import inbox_middleware
    from edinbox.sources import publisher

    amqp = "amqp://guest:guest@127.0.0.1:5672/"
    replies = f"{unique_name}-replies"
    first = AsyncInbox(f"sqlite:///{tmp_path / 'a.db'}", consumer="a")
    second = AsyncInbox(f"sqlite:///{tmp_path / 'b.db'}", consumer="b")
    for inbox in (first, second):
        await inbox.create_schema()
    done = {"a": asyncio.Event(), "b": asyncio.Event()}
    broker = RabbitBroker(
        amqp,
        middlewares=[inbox_middleware(first, outbox=f"{amqp}?queue={replies}", on_outcome=lambda *_: done["a"].set())],
        logger=None,
    )
    later = RabbitBroker(
        amqp, middlewares=[inbox_middleware(second, on_outcome=lambda *_: done["b"].set())], logger=None
    )

    @broker.subscriber(RabbitQueue(unique_name, auto_delete=True))
    async def answer(body: bytes) -> bytes:
        """Reply through the outbox."""
        return b"ack:" + body

    # declared as edinbox's publisher declares it (a quorum queue whose rejects go to `<queue>.dead`)
    arguments = {"x-queue-type": "quorum", "x-dead-letter-exchange": f"{replies}.dead"}

    @later.subscriber(RabbitQueue(replies, durable=True, arguments=arguments))
    async def take(body: bytes) -> None:
        """Nothing to do: the span is what the test looks at."""

    async def send(destination: str, messages: Any) -> None:
        await publisher(destination)(destination, messages)

    tracer = trace.get_tracer("producer")
    try:
        async with broker, later:
            await broker.start()
            await later.start()
            producer = await _publish_in_span(broker, tracer, "publish invoice", unique_name)
            await asyncio.wait_for(done["a"].wait(), timeout=10)
            assert (await first.relay(send, destinations=[f"{amqp}?queue={replies}"])).sent == 1
            await asyncio.wait_for(done["b"].wait(), timeout=10)
            done["a"].clear()
            await _publish_in_span(broker, tracer, "publish invoice again", unique_name)
            await asyncio.wait_for(done["a"].wait(), timeout=10)
    finally:
        await first.aclose()
        await second.aclose()
        await _delete_queues(amqp, replies, f"{replies}.dead")
    finished = list(spans.get_finished_spans())
    trace_id = producer.get_span_context().trace_id
    by_consumer = _first_settles(finished)
    assert by_consumer["a"].context.trace_id == trace_id
    assert by_consumer["b"].context.trace_id == trace_id
    (handler,) = [s for s in finished if s.name == "edinbox handler" and s.parent == by_consumer["a"].context]
    assert by_consumer["b"].parent is not None
    assert by_consumer["b"].parent.span_id == handler.context.span_id
    original, again = [s for s in settles(finished) if (s.attributes or {}).get("edinbox.consumer") == "a"]
    assert (original.attributes or {}).get("edinbox.outcome") == "processed"
    assert (again.attributes or {}).get("edinbox.outcome") == "duplicate"
    assert again.context.trace_id != trace_id  # the second delivery has a trace of its own, linked to the first
    (link,) = again.links
    assert (link.context.trace_id, link.context.span_id) == (trace_id, original.context.span_id)
    version, trace_hex, span_hex, _flags = (await _shown_trace(tmp_path / "a.db", "a")).split("-")  # W3C traceparent
    assert (version, trace_hex, span_hex) == ("00", f"{trace_id:032x}", f"{original.context.span_id:016x}")
