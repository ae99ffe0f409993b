"""`edinbox run --source sftp://...` end to end against a real OpenSSH server: a hub killed between its commit and
the remote delete, then restarted, books every invoice once, loses no file, and drops each acknowledgment into the
partner's SFTP folder once under its name."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from edinbox.hub import HubConfig
from edinbox.hub.demo._traffic import render
from edinbox.sources.sftp import publish
from hub_ops import init, stats
from servers import PrivateSSH

from .test_hub import doc
from .test_outage import HubProcess, wait_for

COUNT = 9


def _edinbox(*args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    if fault:
        env["EDINBOX_FAULT"] = fault
    return subprocess.run(
        [sys.executable, "-m", "edinbox.cli", *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_a_hub_killed_between_commit_and_remote_delete_books_every_invoice_once(tmp_path: Path) -> None:
    """The hub reads the partner's SFTP folder (delete after the commit); SIGKILLed after its first commit (those
    files still in the folder), it is restarted: every invoice is booked once (the re-read files are duplicates),
    every file is deleted, an unreadable one (permission denied) is parked in rejected/ and counted, and every
    acknowledgment sent (the TA1 and 997 of each interchange, together) sits in the partner's outbound folder as one
    file under its producer id, with no temporary file left."""
    with PrivateSSH() as ssh:
        source = ssh.url("in", settle="0.2", poll="0.1", delete="true")
        outbound = ssh.url("out")
        (tmp_path / "hub.toml").write_text(f'[partners."*"]\noutbound = "{outbound}"\nta1 = "always"\n')
        config = HubConfig(db=f"sqlite:///{tmp_path / 'hub.db'}", source=source)
        asyncio.run(init(config))
        docs = [doc(control=f"{300 + n:09d}", number=f"SFTP-{n}") for n in range(COUNT)]
        asyncio.run(publish(source, [(f"invoice-{n}", render(d)) for n, d in enumerate(docs)]))
        locked = ssh.folder("in") / "locked.edi"
        locked.write_bytes(render(doc(control="000000399", number="SFTP-LOCKED")))
        locked.chmod(0)
        common = ["--db", config.db, "--config", str(tmp_path / "hub.toml"), "--source", source]
        run = ["run", "--once", "--batch-size", "4", "--idle-timeout", "1", *common]
        killed = _edinbox(*run, "--no-relay", fault="after_commit:1")
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        assert len([p for p in ssh.folder("in").iterdir() if p.is_file()]) == COUNT + 1  # nothing deleted yet
        finished = _edinbox(*run)
        assert finished.returncode == 0, finished.stderr
        counts = asyncio.run(stats(config))
        assert (counts["processed"], counts["invoices"]) == (COUNT, COUNT)
        assert counts["duplicate"] >= 1  # the killed batch, read again
        assert counts["rejected_payloads"] == 1  # the unreadable file, parked with its reason
        assert [p for p in ssh.folder("in").iterdir() if p.is_file()] == []
        assert not (ssh.folder("in") / "archive").exists()  # delete=true: no archive folder made
        assert sorted(p.name for p in ssh.folder("in/rejected").iterdir()) == ["locked.edi", "locked.edi.reason"]
        dropped = sorted(p.name for p in ssh.folder("out").iterdir())
        acks = counts["acknowledgments"]
        assert acks["TA1"] == acks["997"] == COUNT
        # a file per interchange's TA1 and 997 (the re-read interchanges were answered with a duplicate notice each)
        assert len(dropped) == counts["outbox"]["sent"] == COUNT + acks["duplicate_notices"]
        assert acks["together"] == COUNT
        assert all(name.endswith(".edi") and not name.startswith(".") for name in dropped)


def test_the_hub_waits_out_an_sftp_server_down_and_stops_promptly_on_sigterm(tmp_path: Path) -> None:
    """`edinbox run` on an SFTP folder whose server is killed does not exit: it logs the outage, books what is
    dropped once the server is back (no attempt charged: nothing failed or dead), exits 0 soon after SIGTERM, and
    writes nothing but its own log lines."""
    with PrivateSSH() as ssh:
        source = ssh.url("in", settle="0.2", poll="0.1")
        config = HubConfig(db=f"sqlite:///{tmp_path / 'hub.db'}", source=source)
        asyncio.run(init(config))
        hub = HubProcess("--db", config.db, "--source", source, "--idle-timeout", "0.5")
        try:
            wait_for(lambda: bool(hub.events("started")), timeout=60, what="the hub's start")
            ssh.kill()
            wait_for(lambda: bool(hub.events("dependency-down")), timeout=60, what="the outage's log line")
            assert hub.proc.poll() is None
            ssh.start()
            docs = [doc(control=f"{500 + n:09d}", number=f"BACK-{n}") for n in range(3)]
            asyncio.run(publish(source, [(f"back-{n}", render(d)) for n, d in enumerate(docs)]))
            wait_for(lambda: len(hub.events("settled")) >= 3, timeout=60, what="the invoices after the outage")
            began = time.monotonic()
            assert hub.stop() == 0, "\n".join(hub.lines)
            assert time.monotonic() - began < 10
        finally:
            if hub.proc.poll() is None:
                hub.proc.kill()
        counts = asyncio.run(stats(config))
        assert (counts["invoices"], counts["journal"]["failed"], counts["journal"]["dead"]) == (3, 0, 0)
        assert any("dependency-back" in line for line in hub.lines)
        # every line is the hub's own log line: no driver line (asyncssh logs each connection at INFO), no warning
        assert all(re.match(r"time=\S+ level=[a-z]+ logger=edinbox", line) for line in hub.lines), hub.lines
