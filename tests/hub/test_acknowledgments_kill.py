"""Acknowledgments under SIGKILL, through `edinbox run` and `edinbox relay`: a hub killed between the commit and the
relay, and a relay killed between the send and the mark, on the spool and on RabbitMQ. Every acknowledgment arrives
at least once under the same producer id, none is lost, and the partner's inbox sees each once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from edinbox import Inbox, Message, Outcome, edi
from edinbox.hub import HubConfig
from edinbox.hub.demo._traffic import PARTNERS, render
from edinbox.sources.spool import publish
from hub_ops import init, stats
from received import drain
from services import require_service

from .test_hub import doc

COUNT = 12


def edinbox(*args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the command from this worktree's code in a subprocess, the fault point armed when given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    if fault:
        env["EDINBOX_FAULT"] = fault
    return subprocess.run(
        [sys.executable, "-m", "edinbox.cli", *args], env=env, capture_output=True, text=True, timeout=180, check=False
    )


@pytest.mark.parametrize("outbound", ["spool", "rabbitmq"])
def test_acknowledgments_survive_kills_of_the_hub_and_the_relay(
    tmp_path: Path, unique_name: str, outbound: str
) -> None:
    """A hub killed after its first commit (its acknowledgments committed, not relayed: run's relay child may send
    them before it sees the hub is gone), then relays killed after their first send (before marking): the restarted
    processes send every acknowledgment, each at least once with its key as producer id, every payload an
    acknowledgment whose key is that id; the partner's inbox processes each once."""
    if outbound == "rabbitmq":
        require_service("rabbitmq")
        destination = f"amqp://guest:guest@127.0.0.1/?queue={unique_name}"
    else:
        destination = f"dir://{tmp_path / 'partner'}"
    spool = tmp_path / "spool"
    db = f"sqlite:///{tmp_path / 'hub.db'}"
    (tmp_path / "hub.toml").write_text(
        f'[partners."*"]\noutbound = "{destination}"\nta1 = "always"\n', encoding="utf-8"
    )
    config = HubConfig(db=db, source=f"dir://{spool}")
    asyncio.run(init(config))
    docs = [doc(control=f"{700 + n:09d}", number=f"INV-7{n}") for n in range(COUNT)]
    asyncio.run(publish(config.source, [(str(n), render(d)) for n, d in enumerate(docs)]))
    common = ["--db", db, "--config", str(tmp_path / "hub.toml")]
    run = ["run", "--once", "--source", config.source, "--batch-size", "4", "--idle-timeout", "0.3", *common]
    killed = edinbox(*run, "--no-relay", fault="after_commit:1")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    for _ in range(2):
        killed = edinbox("relay", "--once", "--limit", "3", *common, fault="after_send:1")
        assert killed.returncode == -signal.SIGKILL, killed.stderr
    finished = edinbox(*run)
    assert finished.returncode == 0, finished.stderr
    counts = asyncio.run(stats(config))
    assert counts["processed"] == COUNT
    assert counts["acknowledgments"]["TA1"] == counts["acknowledgments"]["997"] == COUNT
    # each interchange's TA1 and 997 travel together: one outbox row, one outgoing interchange
    assert counts["outbox"] == {"backlog": 0, "parked": 0, "sent": COUNT, "oldest_unsent_age_seconds": None}
    deliveries = asyncio.run(drain(destination, consumer="partner"))
    ids = [message_id for message_id, _ in deliveries]
    assert len(set(ids)) == COUNT
    assert len(ids) > COUNT  # the killed relays had sent rows they never marked: sent again, same id
    for message_id, payload in deliveries:
        (interchange,) = edi.parse(payload)
        assert f"{interchange.source}/{interchange.control_number}" == message_id
        assert interchange.receiver == PARTNERS[0].party
    with Inbox(f"sqlite:///{tmp_path / 'partner.db'}", consumer="partner") as receiver:
        receiver.create_schema()
        outcomes = [
            receiver.process(Message(*reversed(message_id.rsplit("/", 1)), payload), lambda tx, m: None)
            for message_id, payload in deliveries
        ]
    assert outcomes.count(Outcome.PROCESSED) == COUNT
