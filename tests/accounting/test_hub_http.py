"""`edinbox run --accounting URL`: the hub in lease mode against the real accounting service, killed and restarted."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from brokers.harness import BROKERS
from brokers.test_proof import cli, hub_args, publish, stats, traffic
from edinbox.hub.demo.accounting_service import AccountingService
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


def test_the_hub_sends_its_token_and_a_wrong_one_stops_it_with_nothing_parked(tmp_path: Path) -> None:
    """`run --accounting-token-file` against a service that requires a token: with another token the hub exits 1
    with one line saying the API refused its credentials, and nothing is parked or acked; with the right one it
    creates every invoice once. The token is never printed."""
    from accounting.test_service_limits import TOKEN
    from edinbox.hub.demo._traffic import generate
    from edinbox.sources.spool import publish as spool

    spool_dir = tmp_path / "spool"
    source = f"dir://{spool_dir}"
    db = ["--db", f"sqlite:///{tmp_path / 'hub.db'}"]
    assert cli("init", *db, "--source", source).returncode == 0
    traffic = generate(12, duplicate_rate=0.3, seed=5)
    asyncio.run(spool(source, traffic.files))
    wrong, right = tmp_path / "wrong", tmp_path / "right"
    wrong.write_text("not-the-service-token\n")
    right.write_text(TOKEN + "\n")
    with AccountingService(tmp_path / "accounting.db", token=TOKEN) as service:
        run = [*hub_args(source, db), "--accounting", service.url, "--lease", "2s"]
        refused = cli(*run, "--accounting-token-file", str(wrong))
        assert refused.returncode == 1, refused.stderr
        lines = [json.loads(line) for line in refused.stderr.splitlines() if line.strip()]  # --log-format json
        error = [line["error"] for line in lines if line.get("event") == "exited"]
        assert len(error) == 1, refused.stderr
        assert "answered 401" in error[0]
        assert "EDINBOX_ACCOUNTING_TOKEN" in error[0]
        assert service.invoices() == []
        assert stats(db)["dead"] == 0
        served = cli(*run, "--accounting-token-file", str(right))
        assert served.returncode == 0, served.stderr
        numbers = [i["number"] for i in service.invoices()]
        assert len(numbers) == len(set(numbers)) == traffic.invoices
        for output in (refused, served):
            assert TOKEN not in output.stdout + output.stderr
            assert "not-the-service-token" not in output.stdout + output.stderr


def test_a_token_sent_in_clear_beyond_loopback_is_warned_about_once(tmp_path: Path) -> None:
    """A token for an http:// API on another host than loopback: `run` logs one `accounting-token-cleartext`
    warning naming the host (never the token); for https:// or loopback it logs none."""
    from accounting.test_service_limits import TOKEN

    spool_dir = tmp_path / "spool"
    db = ["--db", f"sqlite:///{tmp_path / 'hub.db'}"]
    assert cli("init", *db, "--source", f"dir://{spool_dir}").returncode == 0
    token = tmp_path / "token"
    token.write_text(TOKEN)
    lines = {}
    for url in ("http://192.0.2.1/invoices", "https://192.0.2.1/invoices", "http://127.0.0.1:9/invoices"):
        args = [*hub_args(f"dir://{spool_dir}", db), "--accounting", url, "--accounting-token-file", str(token)]
        done = cli(*args)  # nothing waits in the spool: no POST is made
        assert done.returncode == 0, done.stderr
        assert TOKEN not in done.stderr
        lines[url] = [line for line in done.stderr.splitlines() if "accounting-token-cleartext" in line]
    assert len(lines["http://192.0.2.1/invoices"]) == 1
    assert "192.0.2.1" in lines["http://192.0.2.1/invoices"][0]
    assert lines["https://192.0.2.1/invoices"] == lines["http://127.0.0.1:9/invoices"] == []
