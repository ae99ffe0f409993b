"""Credentials are never printed: a password holding `@`, `/`, a space and `:` stays out of every error message and
every log line (edinbox's and the drivers', at DEBUG) of open, receive, ack, an outage and close, on every broker.
"""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from edinbox import ConfigurationError, InboxError, SourceError
from edinbox._redact import RedactFilter
from edinbox._urls import mask
from edinbox.sources import open_source, publisher
from edinbox.testing.contract import collect
from servers import PrivateServer, free_port
from services import require_service

from .test_rabbitmq import channel_closed, close_from_the_server, drop

PASSWORD = "p@s/ :w0rd"
ENCODED = quote(PASSWORD, safe="")
SPELLINGS = (PASSWORD, ENCODED, "s/ :w0rd", "w0rd")


def assert_hidden(*texts: str) -> None:
    """No spelling of the password (nor its tail after the first `@`) appears in any of the texts."""
    for text in texts:
        for spelling in SPELLINGS:
            assert spelling not in text, text


@pytest.mark.parametrize(
    "url",
    [
        f"nats://u:{PASSWORD}@127.0.0.1:4222?stream=S&subject=s",
        f"redis://:{PASSWORD}@127.0.0.1:6379/0?stream=s",
        f"amqp://guest:{PASSWORD}@127.0.0.1/?queue=q",
        f"kafka://u:{PASSWORD}@127.0.0.1:9092?topic=t",
        f"postgresql://user:{PASSWORD}@[::1]:5432/db",
        f"nats://u:{ENCODED}@127.0.0.1:4222",
    ],
)
def test_mask_hides_a_password_of_any_characters(url: str) -> None:
    """mask() hides the whole password, raw or percent-encoded, alone or inside a longer text with another URL."""
    assert_hidden(mask(url))
    text = f"cannot connect to {url}: refused (see redis://h:6379/0 and amqp://a:b@other/x)\nnext line"
    masked = mask(text)
    assert_hidden(masked)
    assert masked.endswith("refused (see redis://h:6379/0 and amqp://a:***@other/x)\nnext line")
    assert "127.0.0.1" in masked or "[::1]" in masked


def test_redact_filter_masks_third_party_records() -> None:
    """RedactFilter on a handler masks what a driver logs: the message, its arguments and its traceback."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Keep()
    handler.addFilter(RedactFilter(urls=[f"amqp://guest:{ENCODED}@127.0.0.1/"]))
    logger = logging.getLogger("httpx.test")
    logger.addHandler(handler)
    try:
        logger.warning('HTTP Request: POST %s "200 OK"', f"https://u:{PASSWORD}@api.example/x?password=abc")
        logger.warning("login with %s failed", PASSWORD)  # a bare password, outside any URL
        try:
            raise ConnectionError(f"amqp://guest:{PASSWORD}@127.0.0.1/ refused")
        except ConnectionError:
            logger.exception("connect failed")
    finally:
        logger.removeHandler(handler)
    assert len(lines) == 3
    assert_hidden(*lines)
    assert "abc" not in lines[0]
    assert "ConnectionError" in lines[2]


@pytest.fixture(params=["nats", "redis"])
def guarded(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PrivateServer]:
    """A private broker that requires the password."""
    server = PrivateServer(request.param, tmp_path, password=PASSWORD)
    server.start()
    yield server
    server.kill()


def _url(server: PrivateServer, name: str, password: str = ENCODED) -> str:
    if server.kind == "nats":
        return f"nats://u:{password}@127.0.0.1:{server.port}?stream={name}&subject={name}.in&open_timeout=2"
    return f"redis://:{password}@127.0.0.1:{server.port}/0?stream={name}&open_timeout=2"


async def test_password_never_printed_through_a_whole_life(
    guarded: PrivateServer, unique_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Open, receive, ack, an outage (errors from receive, ack and reopen) and close: no message, no log line
    (every logger at DEBUG, no filter installed) shows the password; a wrong password is a ConfigurationError."""
    caplog.set_level(logging.DEBUG)
    url = _url(guarded, unique_name)
    errors: list[InboxError] = []
    await publisher(url)(url, [("a", b"x"), ("b", b"y")])
    source = open_source(url, consumer="hub")
    assert_hidden(source.url, repr(source))
    async with source:
        [first, second] = await collect(source, 2, within=10)
        await source.ack(first)
        guarded.kill()
        for call in (lambda: source.ack(second), lambda: source.receive(max_messages=1, timeout=0.3)):
            try:
                await call()
            except SourceError as exc:
                errors.append(exc)
    reopened = open_source(url, consumer="hub")
    with pytest.raises(SourceError) as down:
        await reopened.open()
    errors.append(down.value)
    guarded.start()
    wrong = open_source(_url(guarded, unique_name, password=quote("n0t-" + PASSWORD, safe="")), consumer="hub")
    started = time.monotonic()
    with pytest.raises(ConfigurationError) as refused:
        await wrong.open()
    assert time.monotonic() - started < 5  # refused at once, not retried as if the broker were down
    errors.append(refused.value)
    assert len(errors) >= 3
    assert_hidden(*(str(e) for e in errors), *(repr(e.__cause__) for e in errors), caplog.text)


async def test_rabbitmq_refusing_the_password_never_prints_it(
    unique_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A password RabbitMQ refuses is a ConfigurationError at open; neither it nor any log line shows the password."""
    require_service("rabbitmq")
    caplog.set_level(logging.DEBUG)
    source = open_source(f"amqp://guest:{ENCODED}@127.0.0.1/?queue={unique_name}&open_timeout=1", consumer="hub")
    with pytest.raises(ConfigurationError) as caught:
        await source.open()
    await source.aclose()
    assert "refused" in str(caught.value)
    assert_hidden(str(caught.value), caplog.text)


@pytest.fixture
def rabbit_user(unique_name: str) -> Iterator[str]:
    """A RabbitMQ user of the shared broker whose password holds `@/ :` (the broker itself keeps running)."""
    require_service("rabbitmq")
    user = f"edinbox-{unique_name}"
    run = [("add_user", user, PASSWORD), ("set_permissions", "-p", "/", user, ".*", ".*", ".*")]
    for args in run:
        subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=60)
    yield user
    subprocess.run(["rabbitmqctl", "-q", "delete_user", user], check=True, capture_output=True, timeout=60)


async def test_rabbitmq_password_never_printed_through_a_reconnection(
    rabbit_user: str, unique_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Publish, receive, a connection the broker closes (aio-pika reconnects and logs it), a stale ack, close: the
    password of the URL shows in no message and no log line."""
    caplog.set_level(logging.DEBUG)
    url = f"amqp://{rabbit_user}:{ENCODED}@127.0.0.1/?queue={unique_name}&reconnect_interval=0.2"
    errors: list[SourceError] = []
    try:
        await publisher(url)(url, [("a", b"x"), ("b", b"y")])
        async with open_source(url, consumer="hub") as source:
            [first, second] = await collect(source, 2, within=10)
            await source.ack(first)
            assert close_from_the_server(f"edinbox hub {unique_name}") == 1
            await channel_closed(second)
            with pytest.raises(SourceError) as stale:
                await source.ack(second)
            errors.append(stale.value)
            [again] = await collect(source, 1, within=10)
            await source.ack(again)
    finally:
        await drop(unique_name)
    assert "reconnect" in caplog.text.lower()  # the drivers did log the outage
    assert_hidden(*(str(e) for e in errors), caplog.text)


async def test_kafka_failure_never_prints_the_password(caplog: pytest.LogCaptureFixture) -> None:
    """Publishing to an unreachable Kafka with SASL credentials fails with a message that hides the password, and
    librdkafka's own log lines go through Python logging instead of straight to stderr."""
    caplog.set_level(logging.DEBUG)
    url = f"kafka://u:{ENCODED}@127.0.0.1:{free_port()}?topic=t&message.timeout.ms=500&socket.timeout.ms=500"
    with pytest.raises(SourceError) as caught:
        await publisher(url)(url, [("a", b"x")])
    assert "Connect to" in caplog.text  # librdkafka's own lines reach logging (and so the hub's RedactFilter)
    assert_hidden(str(caught.value), caplog.text)
