"""Prometheus metrics: `edinbox run --metrics-port` serves /metrics, and its counters agree with `stats --json`."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from edinbox.hub import HubConfig
from edinbox.hub.demo._traffic import generate
from edinbox.metrics import Metrics
from edinbox.sources.spool import publish
from hub.scrape import scrape, settled_by_outcome
from servers import free_port

_COMMAND = [sys.executable, "-m", "edinbox.cli"]
EVERY_ADDRESS = "0.0.0.0"  # noqa: S104 - the listener the tests refuse or allow


def _db_args(config: HubConfig) -> list[str]:
    return ["--db", config.db, "--table", config.table]


def journal_rows(families: dict[str, list[Any]]) -> dict[str, float]:
    """The edinbox_journal_rows gauge by status."""
    return {s.labels["status"]: s.value for s in families.get("edinbox_journal_rows", [])}


def test_metrics_after_a_demo_run_equal_stats(hub_config: HubConfig, spool: Path, tmp_path: Path) -> None:
    """A scrape of a running hub parses, and its settled counters and journal gauges equal `stats --json`; the one
    partner with an agreement has its own partner label, the others count as `other`."""
    traffic = generate(40, duplicate_rate=0.5, seed=11)
    asyncio.run(publish(hub_config.source, traffic.files))
    port = free_port()
    env = {**os.environ, "EDINBOX_METRICS_PORT": str(port)}
    agreements = tmp_path / "hub.toml"
    # the other partners are let in (the registry's refusals are test_partners'): they are counted as `other`
    agreements.write_text('[hub]\nunknown_partners = "accept"\n[partners."ZZ:ACMESUPPLY"]\nacknowledgment = "none"\n')
    command = [*_COMMAND, "run", "--config", str(agreements), *_db_args(hub_config), "--source", hub_config.source]
    hub = subprocess.Popen(
        [*command, "--batch-size", "5", "-q"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        families: dict[str, list[Any]] = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                families = scrape(port)
            except OSError:
                families = {}
            if sum(settled_by_outcome(families).values()) >= len(traffic.files):
                break
            time.sleep(0.2)
        out = subprocess.run(
            [*_COMMAND, "stats", *_db_args(hub_config), "--json"], capture_output=True, text=True, check=True
        ).stdout
        counts = json.loads(out)
        journal = {status: float(n) for status, n in counts["journal"].items()}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and journal_rows(families) != journal:
            time.sleep(0.5)  # the journal gauges are refreshed every 5 s: wait for one after the last batch
            families = scrape(port)
    finally:
        hub.send_signal(signal.SIGTERM)
        _, err = hub.communicate(timeout=30)
    assert hub.returncode == 0, err
    settled = settled_by_outcome(families)
    for outcome in ("processed", "duplicate", "conflict", "resent", "bypassed", "rejected", "dead"):
        assert settled.get(outcome, 0) == counts[outcome], outcome
    assert sum(settled.values()) == counts["received"] == len(traffic.files)
    assert journal_rows(families) == journal
    batches = [s for s in families["edinbox_batch_size"] if s.name == "edinbox_batch_size_sum"]
    assert sum(s.value for s in batches) == len(traffic.files)
    partners = {s.labels["partner"] for s in families["edinbox_messages_settled"] if s.labels["outcome"] == "processed"}
    assert partners == {"ZZ:ACMESUPPLY", "other"}
    types = {s.labels["message_type"] for s in families["edinbox_messages_settled"]}
    assert types <= {"INVOIC", "810", "997", "CONTRL", "other", ""}


def test_metrics_port_in_use_is_a_configuration_error(tmp_path: Path) -> None:
    """A metrics port another process holds stops `run` at start with one line naming it (exit 1)."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        db = f"sqlite:///{tmp_path}/x.db"
        subprocess.run([*_COMMAND, "init", "--db", db], capture_output=True, check=True)
        proc = subprocess.run(
            [*_COMMAND, "run", "--db", db, "--source", f"dir://{tmp_path}", "--metrics-port", str(port), "--once"],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    assert proc.returncode == 1
    assert f"cannot serve /metrics on 127.0.0.1:{port}" in proc.stderr


def test_library_instruments_share_a_callers_registry() -> None:
    """Metrics(registry=...) registers in the embedding service's registry; a second one there is refused."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    metrics = Metrics(registry, partners=["ZZ:ACME"])
    metrics.settled("processed", consumer="c", partner="ZZ:ACME", message_type="INVOIC", n=3)
    metrics.purged(consumer="c", rows=7)
    text = generate_latest(registry).decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }
    key = (("consumer", "c"), ("message_type", "INVOIC"), ("outcome", "processed"), ("partner", "ZZ:ACME"))
    assert samples[("edinbox_messages_settled_total", key)] == 3
    assert samples[("edinbox_purged_rows_total", (("consumer", "c"),))] == 7
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        Metrics(registry)


def test_metrics_port_comes_from_the_toml_file_too(tmp_path: Path) -> None:
    """`metrics_port` and `metrics_host` are keys of [hub]; a port outside 0..65535 is refused with its name."""
    from edinbox._errors import ConfigurationError
    from edinbox.hub import load_config

    path = tmp_path / "hub.toml"
    path.write_text('[hub]\nmetrics_port = 9464\nmetrics_host = "::1"\n')
    config = load_config(path)
    assert (config.metrics_port, config.metrics_host) == (9464, "::1")
    path.write_text("[hub]\nmetrics_port = 70000\n")
    with pytest.raises(ConfigurationError, match="metrics_port"):
        load_config(path)


async def test_journal_gauges_that_cannot_be_refreshed_say_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A private PostgreSQL stopped under an idle hub: the gauges' refresh fails, and one `gauges-stale` line says
    so (not one per refresh, and none once it works again); the gauges keep their last values meanwhile."""
    import logging

    from edinbox.hub import open_hub
    from hub_ops import init
    from servers import PrivatePostgres

    (tmp_path / "spool").mkdir()
    with PrivatePostgres() as server:
        config = HubConfig(db=server.url, source=f"dir://{tmp_path / 'spool'}")
        await init(config)
        metrics = Metrics()
        async with open_hub(config, metrics=metrics) as hub:
            await hub.refresh()
            server.stop()
            with caplog.at_level(logging.WARNING, logger="edinbox.hub"):
                await hub.refresh()
                await hub.refresh()
                server.start()
                await hub.refresh()
                await hub.refresh()
    stale = [r.getMessage() for r in caplog.records if r.getMessage().startswith("gauges-stale")]
    assert len(stale) == 1, stale
    assert "database" in stale[0]


def settled_series(metrics: Metrics) -> dict[tuple[str, str, str], float]:
    """edinbox_messages_settled_total by (outcome, partner, message_type), from the exposition text."""
    return {
        (s.labels["outcome"], s.labels["partner"], s.labels["message_type"]): s.value
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for s in family.samples
        if s.name == "edinbox_messages_settled_total"
    }


def test_three_thousand_partners_give_a_bounded_number_of_series() -> None:
    """3,000 distinct senders and 3,000 made-up message types make at most (partners + 2) x (types + 2) series per
    outcome: the configured partner and the known types keep their labels, every other one counts as `other`,
    and no delivery is lost from the totals."""
    metrics = Metrics(partners=["ZZ:ACME", "*"])
    for n in range(3000):
        metrics.settled("processed", consumer="c", partner=f"ZZ:P{n}", message_type=f"X{n}" if n % 2 else "invoic")
    metrics.settled("processed", consumer="c", partner="ZZ:ACME", message_type="810", n=5)
    metrics.settled("rejected", consumer="c")  # not an interchange: no partner, no type
    series = settled_series(metrics)
    assert series == {
        ("processed", "other", "INVOIC"): 1500,
        ("processed", "other", "other"): 1500,
        ("processed", "ZZ:ACME", "810"): 5,
        ("rejected", "", ""): 1,
    }
    assert len(metrics.exposition()) < 10_000


def test_the_hubs_metrics_label_its_agreements_and_routes_only(tmp_path: Path) -> None:
    """`edinbox run` labels the partners of [partners] and the types of [routes] (beside the known ones); a
    partner without an agreement is `other`."""
    from edinbox.cli._run import _metrics

    config = HubConfig(
        metrics_port=free_port(), partners={"ZZ:ACME": {"acknowledgment": "none"}}, routes={"DESADV": "bypass"}
    )
    metrics, server = _metrics(config)
    try:
        assert metrics.partners == {"ZZ:ACME"}
        assert {"INVOIC", "810", "997", "999", "TA1", "CONTRL", "APERAK", "DESADV"} == metrics.message_types
        metrics.settled("bypassed", consumer="c", partner="ZZ:OTHER", message_type="DESADV")
        assert settled_series(metrics) == {("bypassed", "other", "DESADV"): 1}
    finally:
        server.shutdown()


def test_a_listener_beyond_loopback_needs_metrics_public(tmp_path: Path) -> None:
    """`--metrics-host 0.0.0.0` alone is a configuration error (exit 1, one line naming --metrics-public);
    with `--metrics-public` the hub serves /metrics there and logs one `metrics-public` warning saying it has no
    authentication."""
    db = f"sqlite:///{tmp_path}/x.db"
    subprocess.run([*_COMMAND, "init", "--db", db], capture_output=True, check=True)
    port = free_port()
    base = [*_COMMAND, "run", "--db", db, "--source", f"dir://{tmp_path}", "--once", "--metrics-port", str(port)]
    refused = subprocess.run(
        [*base, "--metrics-host", EVERY_ADDRESS], capture_output=True, text=True, check=False, timeout=60
    )
    assert refused.returncode == 1
    assert refused.stderr.count("\n") == 1
    assert "/metrics on 0.0.0.0 would be open to the network" in refused.stderr
    assert "--metrics-public" in refused.stderr
    allowed = subprocess.run(
        [*base, "--metrics-host", EVERY_ADDRESS, "--metrics-public"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert allowed.returncode == 0, allowed.stderr
    warnings = [line for line in allowed.stderr.splitlines() if "metrics-public" in line]
    assert len(warnings) == 1, allowed.stderr
    assert "level=warning " in warnings[0]
    assert warnings[0].endswith(f"event=metrics-public host=0.0.0.0 port={port} authentication=none")


def test_the_library_refuses_a_public_listener_unless_asked() -> None:
    """`Metrics.serve` on 0.0.0.0 raises ConfigurationError; with `public=True` it serves."""
    from edinbox._errors import ConfigurationError

    metrics = Metrics()
    port = free_port()
    with pytest.raises(ConfigurationError, match="no authentication"):
        metrics.serve(port, host=EVERY_ADDRESS)
    server = metrics.serve(port, host=EVERY_ADDRESS, public=True)
    try:
        assert scrape(port) is not None
    finally:
        server.shutdown()


async def test_a_hub_labels_a_partner_by_its_agreement_and_an_unknown_one_as_other(tmp_path: Path) -> None:
    """A hub run: the sender with an agreement (an id with a space, which the inbox source quotes) is counted under
    the agreement's name, a sender without one under `other`, and a message type nobody routed under `other`."""
    from decimal import Decimal

    from edinbox.hub import open_hub
    from edinbox.hub.demo._traffic import PARTNERS, Doc, render
    from hub_ops import init

    spool = tmp_path / "spool"
    spool.mkdir()
    agreed = dataclasses.replace(PARTNERS[0], id="ACME CO")
    config = HubConfig(
        db=f"sqlite:///{tmp_path / 'hub.db'}",
        source=f"dir://{spool}",
        idle_timeout=0.2,
        partners={"ZZ:ACME CO": {"acknowledgment": "none"}},
        unknown_partners="accept",  # the senders without an agreement are let in, to be counted as `other`
    )
    await init(config)
    files = [
        (f"f{n}", render(Doc(partner, f"{n:09d}", "invoice", f"INV-{n}", lines=((1, Decimal("9.50")),))))
        for n, partner in enumerate([agreed, agreed, PARTNERS[1], PARTNERS[2]])
    ]
    await publish(config.source, files)
    metrics = Metrics(partners=config.partners, message_types=["INVOIC"])
    async with open_hub(config, metrics=metrics) as hub:
        await hub.run(once=True)
    assert settled_series(metrics) == {("processed", "ZZ:ACME CO", "other"): 2, ("processed", "other", "other"): 2}


async def test_a_rejected_interchange_with_a_readable_header_keeps_its_partner_and_type(tmp_path: Path) -> None:
    """Parked interchanges whose ISA header reads (a bad BIG01 date, a missing IEA, a 10,000-digit SE01) are counted
    under their partner and message type; a payload that is not EDI keeps the empty labels."""
    from decimal import Decimal

    from edinbox.hub import open_hub
    from edinbox.hub.demo._traffic import PARTNERS, Doc, render
    from hub_ops import init

    spool = tmp_path / "spool"
    spool.mkdir()
    config = HubConfig(
        db=f"sqlite:///{tmp_path / 'hub.db'}",
        source=f"dir://{spool}",
        idle_timeout=0.2,
        partners={"ZZ:ACMESUPPLY": {"acknowledgment": "none"}},
    )
    await init(config)
    good = [
        render(Doc(PARTNERS[0], f"{n:09d}", "invoice", f"INV-{n}", lines=((1, Decimal("9.50")),))) for n in (1, 2, 3)
    ]
    bad_date = re.sub(rb"BIG\*[0-9]{8}", b"BIG*20261399", good[0], count=1)  # PARTNERS[0] writes `*` and `~`
    truncated = good[1][: good[1].rindex(b"IEA")]
    long_count = re.sub(rb"SE\*[0-9]+\*", b"SE*" + b"9" * 10_000 + b"*", good[2], count=1)
    assert bad_date != good[0]
    assert long_count != good[2]
    files = [("bad-date", bad_date), ("no-iea", truncated), ("long-count", long_count), ("noise", b"not edi at all")]
    await publish(config.source, files)
    metrics = Metrics(partners=config.partners, message_types=["810"])
    async with open_hub(config, metrics=metrics) as hub:
        await hub.run(once=True)
    assert settled_series(metrics) == {("rejected", "ZZ:ACMESUPPLY", "810"): 3, ("rejected", "", ""): 1}
