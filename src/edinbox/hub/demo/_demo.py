"""`edinbox demo`: generated partner traffic through real hub processes, real crashes, and a checked report.

The demo publishes the traffic into a spool folder, then runs `edinbox run --once` as subprocesses. Some runs are
armed with the fault point (`EDINBOX_FAULT=after_commit:N`, N drawn so that each commit crashes with the crash
rate): they SIGKILL themselves between a commit and its ack, leaving their claimed files in `processing/`, and the
next run recovers and redelivers them. The report comes from the database (`edinbox stats`), the check from the
generator's ground truth: invoices == unique valid interchanges (less the partner resends the invoice key caught).
Every partner has an agreement (`hub.toml` in the work folder): its acknowledgments go to `outbound/<partner id>`,
and the second check is that they match what the traffic asked for, each key once.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import click

from edinbox import edi
from edinbox._errors import ConfigurationError, InboxError
from edinbox._urls import database_url, mask
from edinbox.hub import ops as _ops
from edinbox.hub.config import HubConfig
from edinbox.hub.database import on_inbox
from edinbox.hub.demo._traffic import PARTNERS, Traffic, generate
from edinbox.sources.spool import publish

__all__ = ["Report", "run_demo"]

_CLEAN_RUNS = 20
"""Runs allowed beyond the crash budget before the demo gives up (it never needs more than a few)."""
_CONSUMER = "accounting"


@dataclass(slots=True)
class Report:
    """What the demo published, what the hub did (from the database) and whether the check holds."""

    db: str
    table: str
    workdir: str
    messages: int
    seed: int
    files: int
    unique_interchanges: int
    expected_invoices: int
    producer_duplicates: int
    rerendered: int
    conflicts_injected: int
    resends: int
    acks: int
    malformed: int
    asked: int = 0
    """Unique valid interchanges asking for an interchange acknowledgment (TA1 / CONTRL)."""
    x12: int = 0
    """Unique valid X12 interchanges (each gets a 997, or a 999 for the partner that agreed on it)."""
    broken_asked: int = 0
    """Interchanges without their trailer (parked, their header readable) that asked for a TA1 / CONTRL."""
    broken_x12: int = 0
    """X12 interchanges without their trailer (each gets a 997 or 999 rejecting it)."""
    rejections: int = 0
    """Interchanges without their trailer that get a rejection (each once, by key)."""
    outbound_files: int = 0
    outbound_keys: int = 0
    """Distinct acknowledgment keys found in the partners' outbound folders."""
    runs: int = 0
    crashes: int = 0
    seconds: float = 0.0
    left_in_spool: int = 0
    deliveries: int = 0
    """Deliveries the hub settled, from its log: each settled item once per delivery, those of a run killed between
    its commit and its ack included (its last words); independent of the database's counters."""
    dropped: bool = False
    """True when the demo dropped the PostgreSQL schema it created (no --keep)."""
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """The checks: every unique valid interchange settled once, each invoice created once, every delivery
        counted under one outcome, nothing left; and the acknowledgments: one per interchange that asked, one notice
        per partner duplicate, each key delivered."""
        s = self.stats
        return (
            s.get("invoices") == self.expected_invoices
            and s.get("processed", 0) + s.get("resent", 0) == self.unique_interchanges
            and s.get("received") == self.deliveries
            and self.left_in_spool == 0
            and self.acknowledgments_ok
        )

    @property
    def acknowledgments_ok(self) -> bool:
        """Acknowledgments == interchanges that asked (TA1 / CONTRL), a 997 or 999 per X12 interchange, parked ones
        without their trailer included (rejections, once each), one notice per partner duplicate (re-sent copy or
        reused control number), and every key in an outbound folder (a TA1 and its 997 / 999 share one)."""
        a = self.stats.get("acknowledgments", {})
        written = sum(int(a.get(k, 0)) for k in ("TA1", "997", "999", "CONTRL", "duplicate_notices"))
        written -= int(a.get("together", 0))  # a TA1 and its 997 / 999 are one interchange
        return (
            int(a.get("TA1", 0)) + int(a.get("CONTRL", 0)) == self.asked + self.broken_asked
            and int(a.get("997", 0)) + int(a.get("999", 0)) == self.x12 + self.broken_x12
            and int(a.get("rejections", 0)) == self.rejections
            and int(a.get("duplicate_notices", 0)) == self.producer_duplicates + self.conflicts_injected
            and int(a.get("keys", 0)) == written == self.outbound_keys
            and self.stats.get("outbox", {}).get("backlog") == 0
        )

    def as_dict(self) -> dict[str, Any]:
        """The report as one JSON-able object."""
        return {**asdict(self), "ok": self.ok}

    def render(self) -> str:
        """The report as people read it."""
        s = self.stats
        journal = s.get("journal", {})
        lines = [
            f"edinbox demo: {self.messages} interchanges from {len(PARTNERS)} partners (seed {self.seed}) "
            f"in {self.seconds:.1f} s",
            f"  database      {mask(self.db)} (journal {self.table})",
            f"  spool         {self.workdir}/spool (hub log: {self.workdir}/hub.log)",
            f"  published     {self.files} files: {self.producer_duplicates} producer duplicates "
            f"({self.rerendered} re-rendered with other separators), {self.conflicts_injected} reused control numbers,",
            f"                {self.resends} invoices re-sent in a new interchange, {self.acks} acknowledgments, "
            f"{self.malformed} malformed",
            f"  hub runs      {self.runs} ({self.crashes} killed between commit and ack, then restarted)",
            f"  deliveries    {s.get('received', 0)} settled (each interchange once per delivery, redeliveries "
            f"included; {self.deliveries} in the hub's log)",
            f"    processed   {s.get('processed', 0)} (invoices created)",
            f"    resent      {s.get('resent', 0)} (invoice already in accounting: caught by the invoice key)",
            f"    duplicate   {s.get('duplicate', 0)} (key already journaled, same content: nothing ran)",
            f"    conflict    {s.get('conflict', 0)} (key already processed, other content: nothing ran, kept)",
            f"    dead        {s.get('dead', 0)} (key parked in the journal)",
            f"    rejected    {s.get('rejected', 0)} (not journaled: no trailer, or not EDI; "
            f"{s.get('rejected_payloads', 0)} distinct payloads parked)",
            f"    bypassed    {s.get('bypassed', 0)} (acknowledgments: 997 / CONTRL skip the inbox)",
            f"  journal       {journal.get('processed', 0)} keys processed ({journal.get('conflict', 0)} of them "
            f"with a conflict), {journal.get('dead', 0)} dead",
            f"  invoices      {s.get('invoices', 0)} created",
            f"  left          {self.left_in_spool} files in inbound/ or processing/",
            f"check: invoices {s.get('invoices', 0)} == unique valid interchanges {self.unique_interchanges}"
            f" - partner resends {self.resends} = {self.expected_invoices}; deliveries {s.get('received', 0)} == "
            f"{self.deliveries}: {'OK' if self.ok else 'FAILED'}",
        ]
        a = self.stats.get("acknowledgments", {})
        interchange_acks = int(a.get("TA1", 0)) + int(a.get("CONTRL", 0))
        functional = int(a.get("997", 0)) + int(a.get("999", 0))
        where = f"--db '{mask(self.db)}'" + (f" --table {self.table}" if self.table != "inbox" else "")
        closer = (
            f"  schema        {self.table.split('.')[0]} dropped (--keep keeps it)"
            if self.dropped
            else f"  look closer   edinbox stats {where}; edinbox list {where} --status rejected"
        )
        lines[-1:-1] = [
            f"  acknowledged  TA1 {a.get('TA1', 0)}, 997 {a.get('997', 0)}, 999 {a.get('999', 0)}, "
            f"CONTRL {a.get('CONTRL', 0)}, duplicate notices {a.get('duplicate_notices', 0)}, "
            f"rejections {a.get('rejections', 0)} (of interchanges parked without their trailer)",
            f"  outbound      {self.outbound_files} files in {self.workdir}/outbound/<partner>/inbound, "
            f"{self.outbound_keys} distinct keys (a relay killed before marking sends a key again)",
            closer,
        ]
        lines.append(
            f"check: acknowledgments {interchange_acks} == interchanges that asked {self.asked + self.broken_asked}"
            f" ({self.broken_asked} parked), 997/999 {functional} == X12 interchanges {self.x12 + self.broken_x12}"
            f" ({self.broken_x12} parked), rejections {a.get('rejections', 0)} == {self.rejections},"
            f" duplicate notices {a.get('duplicate_notices', 0)} == partner"
            f" duplicates {self.producer_duplicates + self.conflicts_injected}, each key once in outbound"
            f" ({self.outbound_keys}): {'OK' if self.acknowledgments_ok else 'FAILED'}"
        )
        return "\n".join(lines)


def _agreements(workdir: Path) -> Path:
    """The partners' agreements: every partner's acknowledgments go to its own outbound folder; Globex Foods (an
    005010 partner) gets 999s instead of 997s."""
    path = workdir / "hub.toml"
    outbound = json.dumps(f"dir://{workdir / 'outbound'}/{{id}}")
    path.write_text(
        f'[partners."*"]\noutbound = {outbound}\n\n[partners."01:123456789"]\n'
        f'outbound = {outbound}\nacknowledgment = "999"\n',
        encoding="utf-8",
    )
    return path


def _outbound(folder: Path) -> tuple[int, int]:
    """Files in the partners' outbound folders, and the distinct acknowledgment keys among them."""
    files = [p for p in folder.glob("*/inbound/*") if p.is_file()] if folder.exists() else []
    keys = set()
    for path in files:
        (interchange,) = edi.parse(path.read_bytes())
        keys.add(interchange.key)
    return len(files), len(keys)


def _fault(rng: random.Random, crash_rate: float) -> int | None:
    """Commits before the crash: geometric with the crash rate as the chance per commit (None: no crash)."""
    if crash_rate <= 0:
        return None
    if crash_rate >= 1:
        return 1
    return 1 + int(math.log(1.0 - rng.random()) / math.log(1.0 - crash_rate))


def _count(folder: Path, *, skip_suffix: str | None = None) -> int:
    try:
        return sum(
            1
            for e in os.scandir(folder)
            if not e.name.startswith(".") and not (skip_suffix and e.name.endswith(skip_suffix))
        )
    except FileNotFoundError:
        return 0


def _pending(spool: Path) -> int:
    processing = spool / "processing"
    claimed = sum(_count(Path(e.path)) for e in os.scandir(processing) if e.is_dir()) if processing.exists() else 0
    return _count(spool / "inbound") + claimed


def run_demo(
    *,
    messages: int,
    duplicate_rate: float,
    crash_rate: float,
    seed: int,
    db: str | None,
    table: str | None,
    workers: int = 1,
    workdir: Path | None = None,
    batch_size: int = 20,
    keep: bool = False,
    echo: Callable[[str], None] = click.echo,
) -> Report:
    """Generate, publish, run hub subprocesses with crashes until the spool is drained, and report.

    `workdir` must be new or empty (a used one would mix two demos' files). With one worker the counts are the
    same on every run with the same seed; several workers race for files, so redeliveries vary (the check holds).
    The PostgreSQL schema or MariaDB database the demo creates (no `table` given) is dropped after the report
    unless `keep`.
    """
    started = time.monotonic()
    if workdir is not None and workdir.exists() and any(workdir.iterdir()):
        raise ConfigurationError(f"--dir {workdir} is not empty: give a new or empty folder")
    workdir = (workdir or Path(tempfile.mkdtemp(prefix="edinbox-demo-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    spool = workdir / "spool"
    db = db or f"sqlite:///{workdir / 'demo.db'}"
    # a fresh PostgreSQL schema or MariaDB database, so a second demo never meets the first one's invoices
    own_schema = table is None and database_url(db).dialect in ("postgresql", "mysql")
    if table is None:
        table = f"edinbox_demo_{uuid.uuid4().hex[:8]}.inbox" if own_schema else "inbox"
    config = HubConfig(db=db, table=table, consumer=_CONSUMER, source=f"dir://{spool}", batch_size=batch_size)
    traffic: Traffic = generate(messages, duplicate_rate=duplicate_rate, seed=seed)
    report = _report(db=db, table=table, workdir=workdir, messages=messages, seed=seed, traffic=traffic)
    agreements = _agreements(workdir)
    asyncio.run(on_inbox(config, lambda inbox: _ops.init(inbox, config=config)))
    asyncio.run(publish(config.source, traffic.files))
    echo(f"published {len(traffic.files)} files into {spool}/inbound; running the hub (log: {workdir}/hub.log)")
    rng = random.Random(seed ^ 0x5EED)  # noqa: S311 - demo crash schedule, not security
    with (
        open(workdir / "hub.log", "ab") as log,
        click.progressbar(length=len(traffic.files), label="settling", file=sys.stderr) as bar,
    ):
        done = 0
        # each crash redelivers a batch: a budget of crashes (the crash rate per batch of the traffic) ends them
        budget = math.ceil(crash_rate * len(traffic.files) / batch_size) + 1 if crash_rate > 0 else 0
        while _pending(spool) and report.runs < budget * workers + _CLEAN_RUNS:
            procs = []
            first = report.runs == 0
            for _ in range(workers):
                env = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")}  # flags say it all
                crash_after = _fault(rng, crash_rate) if report.crashes < budget else None
                if crash_after is not None and first:
                    # show at least one crash: every first-round hub dies after its first commit, and one of them
                    # commits whichever of them the spool's files go to
                    crash_after = 1
                if crash_after is not None:
                    env["EDINBOX_FAULT"] = f"after_commit:{crash_after}"
                command = _command(config, agreements)
                procs.append(subprocess.Popen(command, env=env, stdout=log, stderr=log))
                report.runs += 1
            done = _wait(procs, report, bar=bar, done=done, spool=spool, workdir=workdir)
        now = _count(spool / "archive") + _count(spool / "rejected", skip_suffix=".reason")
        bar.update(now - done)
    report.left_in_spool = _pending(spool)
    report.outbound_files, report.outbound_keys = _outbound(workdir / "outbound")
    report.deliveries = _logged_deliveries(workdir / "hub.log")
    report.stats = asyncio.run(on_inbox(config, _ops.stats))
    if own_schema and not keep:
        asyncio.run(on_inbox(config, _ops.drop_schema))
        report.dropped = True
    report.seconds = time.monotonic() - started
    return report


def _report(*, db: str, table: str, workdir: Path, messages: int, seed: int, traffic: Traffic) -> Report:
    """The report of a demo before it runs: what was generated."""
    return Report(
        db=db,
        table=table,
        workdir=str(workdir),
        messages=messages,
        seed=seed,
        files=len(traffic.files),
        unique_interchanges=traffic.unique_interchanges,
        expected_invoices=traffic.invoices,
        producer_duplicates=traffic.duplicates,
        rerendered=traffic.rerendered,
        conflicts_injected=traffic.conflicts,
        resends=traffic.resends,
        acks=traffic.acks,
        malformed=traffic.malformed,
        asked=traffic.asked,
        x12=traffic.x12,
        broken_asked=traffic.broken_asked,
        broken_x12=traffic.broken_x12,
        rejections=traffic.rejections,
    )


def _command(config: HubConfig, agreements: Path) -> list[str]:
    """The command line of one hub process of the demo: `edinbox run --once`, logging JSON."""
    return [
        sys.executable,
        "-m",
        "edinbox.cli",
        "run",
        "--once",
        "--idle-timeout",
        "0.3",
        "--db",
        config.db,
        "--table",
        config.table,
        "--consumer",
        _CONSUMER,
        "--source",
        config.source,
        "--batch-size",
        str(config.batch_size),
        "--config",
        str(agreements),
        "--log-format",
        "json",
    ]


def _wait(
    procs: list[subprocess.Popen[bytes]], report: Report, *, bar: Any, done: int, spool: Path, workdir: Path
) -> int:
    """Wait for the hub processes, moving `bar` as the spool's files settle; count the crashes (SIGKILL by the
    fault point); return how many files have settled. Any other failure of a hub ends the demo."""
    while any(p.poll() is None for p in procs):
        time.sleep(0.1)
        now = _count(spool / "archive") + _count(spool / "rejected", skip_suffix=".reason")
        bar.update(now - done)
        done = now
    for p in procs:
        if p.returncode == -signal.SIGKILL:
            report.crashes += 1
        elif p.returncode != 0:
            raise InboxError(f"a hub process failed with exit status {p.returncode}: see {workdir}/hub.log")
    return done


def _logged_deliveries(log: Path) -> int:
    """Deliveries settled according to the hub's JSON log: each settled line once, and the items of each delivery
    a killed run committed (its `killed` line: settled, never acked, so no `settled` line follows).

    The spool's delivery count is not used: a batch nacked after a transient failure (a deadlock between two hubs)
    comes back with its count raised although nothing of it was settled.
    """
    total = 0
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            fields = json.loads(line)  # each line one JSON object (`--log-format json`)
        except ValueError:  # a line the hub did not write (an interpreter's last words)
            continue
        if not isinstance(fields, dict):
            continue
        if fields.get("event") == "settled" and fields.get("outcome") != "not-settled":
            total += 1
        elif fields.get("event") == "killed":
            total += int(fields.get("settled", 0))
    return total
