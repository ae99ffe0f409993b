"""Reading back what was sent to a destination: every delivery waiting there, each acked."""

from __future__ import annotations

from edinbox.sources import open_source

__all__ = ["drain"]


async def drain(url: str, *, consumer: str, idle: float = 2.0) -> list[tuple[str, bytes]]:
    """Receive and ack everything at `url` as `consumer` until a receive waits `idle` seconds for nothing:
    `(producer id, payload)` each."""
    got: list[tuple[str, bytes]] = []
    async with open_source(url, consumer=consumer) as source:
        while deliveries := await source.receive(max_messages=100, timeout=idle):
            for delivery in deliveries:
                got.append((delivery.message_id or "", delivery.payload))
                await source.ack(delivery)
    return got
