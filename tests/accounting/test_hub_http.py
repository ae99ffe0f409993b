"""`edinbox run --accounting URL`: the hub in lease mode against the real accounting service, killed and restarted."""

from __future__ import annotations

import asyncio
from pathlib import Path

from brokers.harness import BROKERS
from brokers.test_proof import cli, hub_args, publish, stats, traffic
from edinbox.hub.accounting_service import AccountingService
from services import require_service

RABBITMQ = next(b for b in BROKERS if b.name == "rabbitmq")


def test_hub_killed_after_commit_posts_each_invoice_once(tmp_path: Path, unique_name: str) -> None:
    """Interchanges via RabbitMQ into the HTTP API, the hub SIGKILLed after a commit: one invoice per interchange."""
    require_service("rabbitmq")
    url = RABBITMQ.url(unique_name)
    db = ["--db", f"sqlite:///{tmp_path / 'hub.db'}"]
    assert cli("init", *db).returncode == 0  # as an operator does before starting the hub
    files, unique = traffic(tmp_path, seed=11)
    try:
        with AccountingService(tmp_path / "accounting.db") as service:
            publish(files, url)
            sink = ["--accounting", service.url, "--lease", "2s"]
            # batches of 20, so the traffic takes several commits and the kill at the second leaves some unsettled
            first = cli(*hub_args(url, db), *sink, "--batch-size", "20", fault="after_commit:2")
            assert first.returncode == -9, first.stderr
            second = cli(*hub_args(url, db), *sink)
            assert second.returncode == 0, second.stderr
            assert len(service.invoices()) == unique
            assert len({(i["seller"], i["number"]) for i in service.invoices()}) == unique
        counts = stats(db)
        assert counts["processed"] == unique
        assert counts["duplicate"] >= len(files) - unique + 1  # the producers' copies and the killed batch
        assert asyncio.run(RABBITMQ.left(unique_name)) == 0
    finally:
        asyncio.run(RABBITMQ.cleanup(unique_name))
