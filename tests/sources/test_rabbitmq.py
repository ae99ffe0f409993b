"""The source contract and RabbitMQ specifics, against the real RabbitMQ on 127.0.0.1:5672."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator
from typing import Any

import aio_pika
import pytest
from aiormq.exceptions import ChannelInvalidStateError

from edinbox import ConfigurationError, SourceError
from edinbox.sources import Delivery, open_source, publisher
from edinbox.sources.rabbitmq import CONFIRM_WAIT, RabbitMQPublisher, RabbitMQSource, publish
from edinbox.testing.contract import collect
from servers import PrivateRabbitMQ, free_port
from services import require_service

from .contract import BrokerContract, settle_all

BROKER = "amqp://guest:guest@127.0.0.1/"


async def drop(queue: str) -> None:
    connection = await aio_pika.connect(BROKER)
    async with connection:
        channel = await connection.channel()
        for name in (queue, f"{queue}.dead"):
            await channel.queue_delete(name)
        await channel.exchange_delete(f"{queue}.dead")


async def _get_all(queue: str) -> list[Any]:
    connection = await aio_pika.connect(BROKER)
    got = []
    async with connection:
        channel = await connection.channel()
        amqp_queue = await channel.get_queue(queue, ensure=False)
        while (message := await amqp_queue.get(fail=False)) is not None:
            got.append(message)
            await message.ack()
    return got


class RabbitContract(BrokerContract):
    """RabbitMQ: requeue on close and nack, `x-delivery-count` on quorum queues, DLX for rejects."""

    queue_type = "quorum"
    quiet = 0.5

    @pytest.fixture
    async def url(self, unique_name: str) -> AsyncIterator[str]:
        """A fresh queue (and its dead-letter exchange and queue), deleted afterwards."""
        require_service("rabbitmq")
        yield f"{BROKER}?queue={unique_name}&queue_type={self.queue_type}"
        await drop(unique_name)

    async def dead_letters(self, url: str) -> list[tuple[str | None, bytes]]:
        """The messages the dead-letter exchange routed to `<queue>.dead`."""
        queue = RabbitMQSource.from_url(url, consumer="x").dead
        return [(m.message_id, m.body) for m in await _get_all(queue)]


class TestRabbitMQQuorum(RabbitContract):
    """The contract on a quorum queue, which counts deliveries."""

    async def test_dead_letter_carries_x_death(self, url: str) -> None:
        """A rejected message reaches the dead-letter queue with the broker's `x-death` record of why."""
        await self.publish(url, [("poison", b"bad")])
        async with self.source(url) as source:
            [delivery] = await collect(source, 1, within=10)
            await source.reject(delivery, reason="bad")
        [parked] = await _get_all(RabbitMQSource.from_url(url, consumer="x").dead)
        assert parked.headers["x-death"][0]["reason"] == "rejected"
        assert parked.message_id == "poison"


class TestRabbitMQClassic(RabbitContract):
    """The contract on a classic queue: a `redelivered` flag but no delivery count."""

    queue_type = "classic"
    counts_deliveries = False

    async def test_redelivery_count_unknown(self, url: str) -> None:
        """On a classic queue a redelivery is flagged but its count is unknown (None), never a made-up number."""
        await self.publish(url, [("a", b"x")])
        async with self.source(url) as source:
            [first] = await collect(source, 1, within=10)
            assert first.delivery_count == 1
            await source.nack(first)
            [again] = await collect(source, 1, within=5)
            assert again.redelivered
            assert again.delivery_count is None
            await source.ack(again)


async def test_header_id_wins_over_a_generated_message_id(unique_name: str) -> None:
    """An `x-message-id` header is the key even though aio-pika stamped a random `message_id` on the publish."""
    require_service("rabbitmq")
    url = f"{BROKER}?queue={unique_name}"
    try:
        async with RabbitMQSource.from_url(url, consumer="hub") as source:
            connection = await aio_pika.connect(BROKER)
            async with connection:
                channel = await connection.channel()
                for _ in range(2):  # a producer retry: aiormq gives each copy another random message_id
                    message = aio_pika.Message(b"h", headers={"x-message-id": "hdr"})
                    await channel.default_exchange.publish(message, routing_key=unique_name)
            got = await collect(source, 2, within=10)
            assert [d.key for d in got] == ["hdr", "hdr"]
            assert got[0].handle.message_id != got[1].handle.message_id
            for delivery in got:
                await source.ack(delivery)
    finally:
        await drop(unique_name)


@pytest.mark.parametrize(
    "query",
    ["", "?queue=a&prefetch=0", "?queue=a&queue_type=stream", "?queue=a b", "?queue=a&queue=b", "?queue=a&bogus=1"],
)
def test_bad_url_is_a_configuration_error_with_password_masked(query: str) -> None:
    """A missing, invalid, repeated or unknown option raises ConfigurationError and never shows the password."""
    with pytest.raises(ConfigurationError) as caught:
        RabbitMQSource.from_url(f"amqp://guest:s3cret@127.0.0.1/{query}", consumer="hub")
    assert "s3cret" not in str(caught.value)
    assert "***" in str(caught.value)


def test_url_options_are_read() -> None:
    """Every documented option of an amqp:// URL lands in the source."""
    source = RabbitMQSource.from_url(
        "amqp://u:p@host:5673/vh?queue=edi.in&queue_type=classic&prefetch=7&dead=parked&heartbeat=5", consumer="hub"
    )
    assert (source.queue, source.queue_type, source.prefetch, source.dead) == ("edi.in", "classic", 7, "parked")
    assert source.url == "amqp://u:***@host:5673/vh?queue=edi.in&queue_type=classic&prefetch=7&dead=parked&heartbeat=5"
    assert RabbitMQSource.from_url("amqp://host/?queue=q&idle_check=2.5", consumer="hub").idle_check == 2.5
    assert RabbitMQSource.from_url("amqp://host/?queue=q", consumer="hub").idle_check == 30.0


def test_confirm_wait_is_read_for_the_publisher() -> None:
    """A publisher reads `confirm_wait` (default 5 s, `CONFIRM_WAIT`); a source reads the same URL (a destination is
    drained as a source), so it takes the option too."""
    assert RabbitMQPublisher("amqp://u:p@host/?queue=q&confirm_wait=0.5").confirm_wait == 0.5
    assert RabbitMQPublisher("amqp://u:p@host/?queue=q&prefetch=7").confirm_wait == CONFIRM_WAIT == 5.0
    assert RabbitMQSource.from_url("amqp://host/?queue=q&confirm_wait=2", consumer="hub").confirm_wait == 2.0


@pytest.mark.parametrize("value", ["0", "-1", "soon", "inf", "nan"])
def test_a_bad_confirm_wait_is_a_one_line_configuration_error(value: str) -> None:
    """`confirm_wait` must be a positive number of seconds: anything else is one line naming the option, the
    password masked."""
    with pytest.raises(ConfigurationError) as caught:
        RabbitMQPublisher(f"amqp://guest:s3cret@127.0.0.1/?queue=q&confirm_wait={value}")
    text = str(caught.value)
    assert f"option confirm_wait={value!r} is invalid: " in text
    assert "s3cret" not in text
    assert "\n" not in text


def test_on_lost_reaches_a_rabbitmq_source_only_through_open_source() -> None:
    """`open_source(..., on_lost=)` hands the callback to a RabbitMQ source; a source that cannot lose its queue
    under it ignores it."""
    lost: list[str] = []
    source = open_source("amqp://host/?queue=q", consumer="hub", on_lost=lost.append)
    assert isinstance(source, RabbitMQSource)
    assert source.on_lost == lost.append
    assert open_source("dir:///tmp/nowhere", consumer="hub", on_lost=lost.append) is not None


@pytest.mark.parametrize(
    ("batch", "query", "prefetch"), [(None, "", 100), (20, "", 100), (100, "", 200), (100, "&prefetch=7", 7)]
)
def test_prefetch_follows_the_hub_batch_unless_the_url_sets_it(batch: int | None, query: str, prefetch: int) -> None:
    """Opened for batches bigger than half of 100, the source asks the broker for twice the batch, so the next batch
    is on its way while one is settled; a `prefetch` in the URL wins."""
    source = open_source(f"amqp://u:p@host/?queue=edi.in{query}", consumer="hub", batch=batch)
    assert isinstance(source, RabbitMQSource)
    assert source.prefetch == prefetch


async def test_hubs_opening_a_new_quorum_queue_together_all_consume(unique_name: str) -> None:
    """Sources opened at the same moment on a queue none has declared yet all start consuming (RabbitMQ may refuse
    a consume with INTERNAL_ERROR while the quorum queue another one declared is still electing its leader)."""
    require_service("rabbitmq")
    url = f"{BROKER}?queue={unique_name}"
    sources = [RabbitMQSource.from_url(url, consumer="hub") for _ in range(6)]
    try:
        results = await asyncio.gather(*(source.open() for source in sources), return_exceptions=True)
        assert [r for r in results if isinstance(r, BaseException)] == []
    finally:
        for source in sources:
            await source.aclose()
        await drop(unique_name)


async def channel_closed(delivery: Delivery, *, within: float = 10) -> None:
    """Wait until the client saw the channel of `delivery` close (the broker's close reached it)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if delivery.handle.channel.is_closed:
                return
        except ChannelInvalidStateError:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the client never saw its channel close")


def close_from_the_server(name: str) -> int:
    """Close, from the broker side (`rabbitmqctl close_connection`), every connection named `name`; return how many."""
    listed = subprocess.run(
        ["rabbitmqctl", "-q", "--no-table-headers", "list_connections", "pid", "client_properties"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    wanted = f'{{"connection_name","{name}"}}'
    pids = [line.split("\t")[0] for line in listed.stdout.splitlines() if wanted in line]
    for pid in pids:
        command = ["rabbitmqctl", "-q", "close_connection", pid, "closed by an edinbox test"]
        subprocess.run(command, check=True, timeout=60, capture_output=True)
    return len(pids)


async def test_connection_closed_by_the_broker_is_reopened(unique_name: str) -> None:
    """A connection the broker closes under a consuming source raises only SourceError (never an empty reason);
    the source reconnects by itself and every message is received and acked, nothing left on the queue."""
    require_service("rabbitmq")
    url = f"{BROKER}?queue={unique_name}&reconnect_interval=0.2"
    sent = [(f"m{n}", b"x") for n in range(10)]
    acked: set[str] = set()
    errors: list[SourceError] = []
    try:
        await publisher(url)(url, sent)
        async with RabbitMQSource.from_url(url, consumer="hub") as source:
            got = await collect(source, 10, within=10)
            for delivery in got[:5]:
                await source.ack(delivery)
                acked.add(delivery.key)
            assert close_from_the_server(f"edinbox hub {unique_name}") == 1
            await channel_closed(got[-1])
            for delivery in got[5:]:  # delivered on the closed channel: requeued by the broker, not ackable here
                with pytest.raises(SourceError) as caught:
                    await source.ack(delivery)
                errors.append(caught.value)
            await settle_all(source, {key for key, _ in sent}, acked, errors)
        assert acked == {key for key, _ in sent}
        assert all(str(exc).strip() and not str(exc).rstrip().endswith(":") for exc in errors)
        assert await _get_all(unique_name) == []
    finally:
        await drop(unique_name)


async def test_open_before_the_broker_answers_raises_source_error_then_works() -> None:
    """With nothing listening, `open` raises SourceError after `open_timeout` (it backs off, it does not exit)."""
    url = f"amqp://guest:guest@127.0.0.1:{free_port()}/?queue=q&open_timeout=0.5"
    source = RabbitMQSource.from_url(url, consumer="hub")
    with pytest.raises(SourceError, match="connecting to"):
        await source.open()
    with pytest.raises(SourceError):
        await source.receive(max_messages=1, timeout=0.2)
    await source.aclose()


async def test_in_progress_is_a_no_op_and_nothing_expires(unique_name: str) -> None:
    """RabbitMQ never takes back a delivery from a live consumer: `ack_wait` is None, `in_progress` does nothing."""
    require_service("rabbitmq")
    url = f"{BROKER}?queue={unique_name}"
    try:
        await publisher(url)(url, [("held", b"x")])
        async with RabbitMQSource.from_url(url, consumer="hub") as source:
            assert source.ack_wait is None
            [delivery] = await collect(source, 1, within=10)
            await source.in_progress(delivery)
            await source.ack(delivery)
        assert await _get_all(unique_name) == []
    finally:
        await drop(unique_name)


async def test_a_queue_declared_with_other_arguments_is_a_configuration_error(unique_name: str) -> None:
    """A queue that exists as classic, opened as quorum, fails `open` at once with a ConfigurationError (no retry
    can fix it), never a SourceError the hub would wait on forever."""
    require_service("rabbitmq")
    try:
        async with RabbitMQSource.from_url(f"{BROKER}?queue={unique_name}&queue_type=classic", consumer="hub"):
            pass
        started = time.monotonic()
        with pytest.raises(ConfigurationError, match=r"PRECONDITION_FAILED|inequivalent"):
            await RabbitMQSource.from_url(f"{BROKER}?queue={unique_name}&open_timeout=30", consumer="hub").open()
        assert time.monotonic() - started < 30 / 2  # not retried until open_timeout
    finally:
        await drop(unique_name)


def _count_acks(delivery: Delivery) -> list[tuple[int, bool]]:
    """Record each `basic.ack` frame sent on the channel `delivery` came on, as (delivery tag, multiple)."""
    channel = delivery.handle.channel
    send = channel.basic_ack
    sent: list[tuple[int, bool]] = []

    async def counted(delivery_tag: int, multiple: bool = False, **kwargs: Any) -> None:
        sent.append((delivery_tag, multiple))
        await send(delivery_tag=delivery_tag, multiple=multiple, **kwargs)

    channel.basic_ack = counted
    return sent


async def test_the_acks_of_a_batch_go_out_in_one_frame(unique_name: str) -> None:
    """Twenty deliveries acked one by one reach the broker as one `multiple` ack, and none of them comes back."""
    require_service("rabbitmq")
    url = f"{BROKER}?queue={unique_name}"
    try:
        await publish(url, [(f"m{n}", b"x") for n in range(20)])
        async with RabbitMQSource.from_url(url, consumer="hub") as source:
            got = await collect(source, 20, within=10)
            sent = _count_acks(got[0])
            for delivery in got:
                await source.ack(delivery)
            await asyncio.sleep(0.2)  # the acks leave once this task waits
            assert sent == [(got[-1].handle.delivery_tag, True)]
        assert await _get_all(unique_name) == []
    finally:
        await drop(unique_name)


async def test_a_multiple_ack_never_covers_a_held_or_rejected_delivery(unique_name: str) -> None:
    """Acks around a delivery held for a delayed nack and a rejected one settle only the acked: the held one comes
    back to the queue when the source closes, the rejected one is in the dead-letter queue, the others are gone."""
    require_service("rabbitmq")
    url = f"{BROKER}?queue={unique_name}"
    try:
        await publish(url, [(f"m{n}", b"x") for n in range(1, 7)])
        async with RabbitMQSource.from_url(url, consumer="hub") as source:
            got = await collect(source, 6, within=10)
            sent = _count_acks(got[0])
            await source.reject(got[1], reason="bad")
            await source.nack(got[3], delay=30)
            for n in (0, 2, 4, 5):
                await source.ack(got[n])
            await asyncio.sleep(0.2)
            assert (got[2].handle.delivery_tag, True) in sent  # m1 to m3 in one frame: m2 was settled already
        assert [m.message_id for m in await _get_all(unique_name)] == ["m4"]
        assert [m.message_id for m in await _get_all(f"{unique_name}.dead")] == ["m2"]
    finally:
        await drop(unique_name)


async def test_an_idle_consumer_whose_broker_stops_fails_its_receive_instead_of_waiting(
    private_rabbitmq: PrivateRabbitMQ, unique_name: str
) -> None:
    """A consumer that looks at its idle queue (`idle_check`) when its broker (a private node) has stopped raises
    SourceError within its probe's bound: its look waited for aio-pika's reconnect without end, so a hub with
    nothing in hand logged no outage and did not stop on SIGTERM."""
    rabbit = private_rabbitmq
    url = f"{rabbit.url}?queue={unique_name}&idle_check=0.2&reconnect_interval=0.2"
    async with RabbitMQSource.from_url(url, consumer="hub") as source:

        async def receiving() -> None:
            while True:
                await source.receive(max_messages=1, timeout=0.5)

        task = asyncio.create_task(receiving())
        await asyncio.to_thread(rabbit.stop)
        with pytest.raises(SourceError):
            await asyncio.wait_for(task, 30)
