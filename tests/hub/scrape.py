"""Reading a hub's /metrics as Prometheus does: over HTTP, parsed by prometheus-client's own parser."""

from __future__ import annotations

import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["scrape", "settled_by_outcome"]


def scrape(port: int) -> dict[str, list[Any]]:
    """GET /metrics and parse it with prometheus-client's own parser: samples by metric family name."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        text = response.read().decode()
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def settled_by_outcome(families: dict[str, list[Any]]) -> dict[str, float]:
    """edinbox_messages_settled_total summed over partners and message types, by outcome."""
    totals: dict[str, float] = {}
    for sample in families.get("edinbox_messages_settled", []):
        if sample.name.endswith("_total"):
            outcome = sample.labels["outcome"]
            totals[outcome] = totals.get(outcome, 0.0) + sample.value
    return totals
