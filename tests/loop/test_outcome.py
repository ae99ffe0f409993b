"""Delivery outcomes and routes as enums: each keeps the exact text the logs, counters, metrics and settings used."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from edinbox import DataError, Outcome, RetryLater
from edinbox.hub.config import DEFAULT_ROUTES, HubConfig, Route
from edinbox.loop import HANDLED, DeliveryOutcome, HandBack, format_line, verdict


def test_every_inbox_outcome_is_a_delivery_outcome_of_the_same_text() -> None:
    """`DeliveryOutcome.of` maps each inbox Outcome to the member of the same text (the log's `outcome=` value)."""
    for outcome in Outcome:
        assert DeliveryOutcome.of(outcome).value == outcome.value


def test_verdict_names_its_outcome_with_a_member() -> None:
    """An outcome acks, a DataError rejects, a RetryLater waits and any other failure is not settled: each a member,
    never free text."""
    assert verdict(Outcome.DUPLICATE)[0].hand_back is HandBack.ACK
    assert verdict(Outcome.DUPLICATE)[1] is DeliveryOutcome.DUPLICATE
    rejected = verdict(DataError("too big"))
    assert rejected[0].hand_back is HandBack.REJECT
    assert rejected[1] is DeliveryOutcome.REJECTED
    later = RetryLater("later", retry_at=datetime.now(UTC), delay=timedelta(seconds=3))
    assert verdict(later)[1] is DeliveryOutcome.WAITING
    assert verdict(RuntimeError("boom"))[1] is DeliveryOutcome.NOT_SETTLED
    assert {DeliveryOutcome.PROCESSED, DeliveryOutcome.RESENT} == HANDLED


def test_outcomes_are_written_as_their_text() -> None:
    """A member in a logfmt line, a JSON log or a metric label is its plain text, as the strings were."""
    line = format_line("settled", {"outcome": DeliveryOutcome.NOT_SETTLED, "key": "k"})
    assert line == "settled outcome=not-settled key=k"
    assert json.dumps({"outcome": DeliveryOutcome.RESENT}) == '{"outcome": "resent"}'
    assert f"{DeliveryOutcome.BYPASSED}" == "bypassed"


def test_routes_are_members_from_the_settings_on() -> None:
    """The configured routes, the default route and `route()` give Route members; a route outside inbox and bypass
    is refused with the same sentence as before."""
    config = HubConfig(routes={"ORDERS": "bypass"}, default_route="bypass")
    assert config.route("orders") is Route.BYPASS
    assert config.route("INVOIC") is Route.INBOX
    assert config.route("DESADV") is Route.BYPASS
    assert all(isinstance(route, Route) for route in config.routes.values())
    dumped = config.model_dump()["routes"]
    assert {kind: route for kind, route in dumped.items() if kind != "ORDERS"} == dict(DEFAULT_ROUTES)
    with pytest.raises(ValueError, match="ORDERS: expected 'inbox' or 'bypass', got 'reject'"):
        HubConfig(routes={"ORDERS": "reject"})
