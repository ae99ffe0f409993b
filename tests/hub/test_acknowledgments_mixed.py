"""Mixed traffic (good, bad but identified, garbage, producer duplicates, reused control numbers) through the spool
and RabbitMQ, every first ack lost so the broker delivers each message twice: the acknowledgments are exactly the
interchanges that asked for one, each answered once by key, and one notice per partner duplicate."""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import replace
from pathlib import Path

import aio_pika
import pytest

from edinbox import edi
from edinbox.hub import HubConfig, open_hub
from edinbox.hub.demo._traffic import PARTNERS, generate, render
from edinbox.sources import rabbitmq, spool
from hub_ops import stats
from sources.test_rabbitmq import BROKER

from .test_acknowledgments import agreed, received
from .test_hub import doc
from .test_rejections import X12, LostAck, bad_date, one_notice_per_resend, resend


@pytest.fixture(params=["spool", "rabbitmq"])
def source(request: pytest.FixtureRequest, hub_config: HubConfig) -> str:
    """The hub's source URL: its spool folder, or a fresh RabbitMQ quorum queue (deleted afterwards)."""
    if request.param == "spool":
        return hub_config.source
    return f"{BROKER}?queue={request.getfixturevalue('queue')}&queue_type=quorum"


async def test_mixed_traffic_is_answered_once_per_key(hub_config: HubConfig, source: str, tmp_path: Path) -> None:
    """Generated traffic plus three unreadable invoices, each delivered twice (first ack lost after the commit):
    TA1 + CONTRL == interchanges that asked, 997 == X12 interchanges (parked ones included), one rejection per
    parked interchange with a readable header, one notice per partner duplicate, each acknowledgment key once, and
    per subject at most one answer of each kind besides the notices; garbage gets nothing."""
    out = tmp_path / "out"
    config = agreed(hub_config.with_overrides(source=source, idle_timeout=1.5), out)
    traffic = generate(40, duplicate_rate=0.3, seed=11)
    unreadable = [replace(doc(control=f"00000095{i}", number=f"B-{i}"), ack_requested=True) for i in range(3)]
    junk = [("junk-1", b"%PDF-1.4 a scanned invoice"), ("junk-2", b"ISA*00*garbage without a header~")]
    files = [*traffic.files, *((f"bad-{i}", bad_date(d)) for i, d in enumerate(unreadable)), *junk]
    publish = spool.publish if source.startswith("dir:") else rabbitmq.publish
    await publish(source, files)
    async with open_hub(config) as hub:
        lost = LostAck(hub.source, b"")
        hub.source = lost
        await hub.run(once=True)
    assert len(lost.lost) >= len(files)  # every delivery was delivered again after its commit
    replies = [r for partner in PARTNERS for r in await received(out / partner.id)]
    acks = (await stats(config))["acknowledgments"]
    notices = traffic.duplicates + traffic.conflicts
    assert acks["TA1"] + acks["CONTRL"] == traffic.asked + traffic.broken_asked + len(unreadable)
    assert acks["997"] + acks["999"] == traffic.x12 + traffic.broken_x12 + len(unreadable)
    assert acks["rejections"] == traffic.rejections + len(unreadable)
    assert acks["duplicate_notices"] == notices
    assert len(replies) == len({r.key for r in replies}) == acks["keys"]
    assert all(r.keyable and r.problems == () for r in replies)
    answers: Counter[tuple[str, str, str]] = Counter()
    for reply in replies:
        for segment in reply.segments:
            if segment.tag == "TA1" and segment.get(5) != "025":
                answers[(reply.receiver.id, "TA1", segment.get(1))] += 1
            elif segment.tag == "UCI" and segment.get(5) != "26":
                answers[(reply.receiver.id, "CONTRL", segment.get(1))] += 1
            elif segment.tag == "AK1":
                answers[(reply.receiver.id, "AK1", segment.get(2))] += 1
    assert set(answers.values()) == {1}
    assert sum(1 for kind in answers if kind[1] == "AK1") == traffic.x12 + traffic.broken_x12 + len(unreadable)
    # garbage gets nothing: every answer's subject is an interchange of the traffic, the unreadable ones included
    subjects = {edi.parse(payload)[0].control_number for key, payload in files if not key.startswith("junk-")}
    assert {kind[2] for kind in answers if kind[1] != "AK1"} <= subjects
    assert {edi.parse(render(d))[0].control_number for d in unreadable} <= {kind[2] for kind in answers}


async def stamped(url: str, messages: list[tuple[str, bytes]]) -> None:
    """Publish as a partner's tool that stamps each publish with an id of its own (header `x-publish-id`)."""
    await rabbitmq.publish(url, [])  # declares the queue as the hub does
    name = url.partition("queue=")[2].partition("&")[0]
    connection = await aio_pika.connect(BROKER)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        for message_id, payload in messages:
            headers = {"x-publish-id": uuid.uuid4().hex}
            message = aio_pika.Message(payload, message_id=message_id, headers=headers)
            await channel.default_exchange.publish(message, routing_key=name)


async def plain_resends(config: HubConfig, payload: bytes, out: Path) -> None:
    """Re-sends that carry the original's message id, body and (no) headers: the one whose ack is lost gets one
    notice, and a second genuine re-send a second."""
    assert await resend(config, payload, publish=rabbitmq.publish, lose_ack=True) == 2
    assert await resend(config, payload, publish=rabbitmq.publish) == 1
    notices = [s.get(5) for r in await received(out / X12.id) for s in r.segments if s.tag == "TA1"]
    assert notices == ["025", "025"]


@pytest.mark.parametrize("hub_config", ["sqlite", "postgresql"], indirect=True)  # MariaDB: the mixed traffic above
@pytest.mark.parametrize("resends", ["stamped", "plain"])
async def test_a_resend_through_rabbitmq_gets_one_notice(
    hub_config: HubConfig, tmp_path: Path, queue: str, resends: str
) -> None:
    """Through RabbitMQ: a re-send whose ack is lost after the commit gets one notice, and each genuine re-send one,
    whether the partner stamps its publishes or sends the original's message id and body again; only stamped ones
    also get their notice after a first transaction that failed (see `delivery_id`)."""
    out = tmp_path / "out"
    config = agreed(hub_config.with_overrides(source=f"{BROKER}?queue={queue}", idle_timeout=1.5), out)
    if resends == "stamped":
        await one_notice_per_resend(config, out, publish=rabbitmq.publish, resend_with=stamped)
        return
    payload = render(doc(control="000000901", number="D-1"))
    await rabbitmq.publish(config.source, [("original", payload)])
    async with open_hub(config) as hub:
        hub.source = LostAck(hub.source, b"")
        assert dict(await hub.run(once=True)) == {"processed": 1, "duplicate": 1, "relayed": 1}
    await received(out / X12.id)
    await plain_resends(config, payload, out)
