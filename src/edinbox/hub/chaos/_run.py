"""`edinbox chaos`: prove a setup (a source, a database) keeps the promise: every invoice once, whatever happens.

It generates distinct invoice interchanges (the demo's generator), publishes them to the source, starts hub
processes (`edinbox run`), publishes redeliveries of published interchanges (same key, same bytes) while they run,
SIGKILLs a random hub every `kill_every` seconds (never twice without a settlement in between, so a slow machine
still makes progress) and starts another (some hubs are also armed with the fault point
that kills them between a commit and its ack), and runs `restart_db_command` once, when a third of the invoices
exist. When every invoice exists, every interchange is settled in the journal, at least one hub was killed and the
restart is done, it stops killing and waits until the hubs stay quiet for `drain_idle` seconds (the source is
drained: nothing comes back), then stops them and counts, from the database:

- `lost`: expected invoices missing from the invoices table;
- `doubled`: effects committed more than once. The invoices table has a unique key, so its rows can never show a
  double; the hub's outcome counters can: the `processed` / `resent` counter of an interchange is added in the very
  transaction that creates its invoices and has no unique key, so a handler that committed twice for one
  interchange counts twice. `doubled` = those counts minus the distinct interchanges the journal settled.

With `poison` and `huge`, bad deliveries (not EDI, cut short, a total the invoices table cannot hold; blobs of 17 to
20 MiB) are published among the good ones (`_chaos_traffic`). Each must be parked in the rejected table exactly
once and none may become an invoice: `parked=K of N` counts those with a row, a second row of one counts as
`parked_twice`, and invoices nobody expected as `stray`. A huge delivery the broker refuses (NATS's max_payload) is
noted and left out of N: it never reached a hub.

The tables are fresh for every run (a new schema on PostgreSQL unless `table` is given) and kept for inspection;
a table that already holds invoices or journal rows is refused. Hub processes never outlive the command.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from edinbox._errors import ConfigurationError, InboxError, TransientError
from edinbox._urls import database_url, mask
from edinbox.hub.chaos import _as2 as _chaos_as2
from edinbox.hub.chaos import _traffic as _bad
from edinbox.hub.chaos._report import ChaosReport, InvoiceKey, Tally, tally
from edinbox.hub.config import HubConfig
from edinbox.hub.database import on_inbox
from edinbox.hub.demo import generate
from edinbox.hub.ops import init
from edinbox.sources import open_source
from edinbox.sources.spool import SpoolSource

__all__ = ["CONSUMER", "ChaosReport", "Tally", "run_chaos", "tally"]

CONSUMER = "accounting"
"""The consumer name of the chaos run's hubs in the journal and on the source."""
_TICK = 0.3
_ARMED = 0.5
"""Share of hub processes armed with the fault point (they kill themselves after a commit, before its ack)."""
_DRAIN_IDLE = 6.0
"""The least quiet time that counts as drained: the spool recovers a killed hub's files within 5 s; the default is
the source's ack_wait + 2 s when that is longer."""
_GRACE = 30.0
"""Seconds a stopped hub has to finish its batch before it is killed."""


class _Hubs:
    """The `edinbox run` processes of one chaos run: started, killed, replaced, and always stopped."""

    def __init__(self, config: HubConfig, *, log: IO[bytes], rng: random.Random, file: Path | None) -> None:
        self.log, self.rng = log, rng
        self.file = ["--config", str(file)] if file else []
        """A settings file for what the environment cannot carry (the AS2 partners)."""
        base = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")}
        # settings travel in the environment, so no password shows in a process listing
        settings = {"db": config.db, "source": config.source, "table": config.table, "consumer": config.consumer}
        self.env = {**base, **{f"EDINBOX_{k.upper()}": v for k, v in settings.items()}}
        self.env["EDINBOX_BATCH_SIZE"] = str(config.batch_size)
        self.running: list[subprocess.Popen[bytes]] = []
        self.killed: set[int] = set()

    def start(self, *, armed: bool) -> None:
        """Start one hub; an armed one kills itself after one of its first ten commits, before the ack."""
        env = dict(self.env)
        if armed and self.rng.random() < _ARMED:
            env["EDINBOX_FAULT"] = f"after_commit:{self.rng.randint(1, 10)}"
        command = [sys.executable, "-m", "edinbox.cli", "run", *self.file]
        self.running.append(subprocess.Popen(command, env=env, stdout=self.log, stderr=self.log))

    def replace(self, *, armed: bool) -> int:
        """Start a hub for each one that died; return how many died on their own (the fault point)."""
        crashed = 0
        for proc in [p for p in self.running if p.poll() is not None]:
            self.running.remove(proc)
            if proc.returncode != -signal.SIGKILL:
                raise InboxError(f"a hub exited with status {proc.returncode}: see {self.log.name}")
            crashed += proc.pid not in self.killed
            self.start(armed=armed)
        return crashed

    def kill_one(self) -> None:
        """SIGKILL a random running hub."""
        alive = [p for p in self.running if p.poll() is None]
        if alive:
            victim = self.rng.choice(alive)
            self.killed.add(victim.pid)
            victim.kill()

    def stop(self) -> None:
        """SIGTERM every hub, give it `_GRACE` seconds to finish its batch, then SIGKILL what is left."""
        for proc in self.running:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + _GRACE
        for proc in self.running:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def size(self) -> int:
        """The hubs' log size: it stays the same while they have nothing to settle."""
        self.log.flush()
        return os.fstat(self.log.fileno()).st_size


@contextlib.contextmanager
def _signals_noted() -> Iterator[list[int]]:
    """Note a SIGTERM or a Ctrl-C (SIGINT) in the yielded list instead of dying, so the loop ends and stops the hubs;
    a second one interrupts at once (the hubs had their SIGTERM: they stop by themselves).

    The loop checks the note between its steps: an exception raised inside a running event loop could leave it
    half closed, and a Ctrl-C that `asyncio.run` turns into the cancellation of its task is lost when the code it
    runs (a tally, a publish) treats the cancellation as a failure and carries on: the run then went on to its end
    and exited 0.
    """
    noted: list[int] = []

    def note(signum: int, frame: object) -> None:
        if noted:
            raise KeyboardInterrupt
        noted.append(signum)

    previous = {signum: signal.signal(signum, note) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield noted
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _poll(config: HubConfig) -> Tally | None:
    """The current tally, or None while the database is down (a restart, for instance)."""
    try:
        return asyncio.run(tally(config))
    except TransientError:
        return None


def _final(config: HubConfig, *, within: float = 60.0) -> Tally:
    """The tally after the run, waiting up to `within` seconds for a database that is still restarting."""
    deadline = time.monotonic() + within
    while True:
        try:
            return asyncio.run(tally(config))
        except TransientError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@dataclass(slots=True)
class _Schedule:
    """When chaos kills, restarts, and ends: the loop's state between two ticks."""

    kill_every: float
    restart_db_command: str | None
    drain_idle: float
    deadline: float
    next_kill: float = 0.0
    settled_at_kill: int = -1
    """The journal's settled count at the last kill: the next kill waits until it moved (progress between kills)."""
    restart: subprocess.Popen[bytes] | None = None
    restarted: bool = False
    settled: bool = False
    quiet_since: float = 0.0
    size: int = -1

    def chaos_done(self, report: ChaosReport) -> bool:
        """At least one kill (unless kills are off) and the restart done (when asked for): a run without its chaos
        proves nothing."""
        killed = self.kill_every <= 0 or report.kills > 0
        return killed and (not self.restart_db_command or report.db_restarts > 0)


def _drive(
    config: HubConfig,
    procs: _Hubs,
    plan: _Schedule,
    report: ChaosReport,
    *,
    expected: set[InvoiceKey],
    bad: list[_bad.Bad],
    workdir: Path,
    terminated: list[int],
    echo: Callable[[str], None],
) -> None:
    """Tick until settled and drained (or the deadline): replace dead hubs, kill one on schedule, restart the
    database once a third of the invoices exist, and watch the database (invoices, settled interchanges, the `bad`
    deliveries parked) and the hubs' log."""
    started = time.monotonic()
    plan.next_kill = started + plan.kill_every if plan.kill_every > 0 else float("inf")
    while True:
        if terminated:
            raise KeyboardInterrupt
        now = time.monotonic()
        if now > plan.deadline:
            report.timed_out = True
            return
        report.crashes += procs.replace(armed=not plan.settled)
        current = _poll(config)
        # never two kills without a settlement between them: on a slow machine hubs still get work done
        due = not plan.settled and now >= plan.next_kill
        if due and current is not None and current.settled > plan.settled_at_kill:
            procs.kill_one()
            report.kills += 1
            plan.next_kill = now + plan.kill_every
            plan.settled_at_kill = current.settled
        if plan.restart is not None and plan.restart.poll() is not None:
            if plan.restart.returncode != 0:
                raise InboxError(f"--restart-db-command exited {plan.restart.returncode}: see {workdir}/restart.log")
            report.db_restarts += 1
            echo("database restarted")
            plan.restart = None
        done = len(expected & current.invoices) if current else 0
        if plan.restart_db_command and not plan.restarted and done * 3 >= len(expected):
            with open(workdir / "restart.log", "ab") as out:  # the operator's own command line, by design
                plan.restart = subprocess.Popen(plan.restart_db_command, shell=True, stdout=out, stderr=out)  # noqa: S602
            plan.restarted = True
        complete = (
            current is not None
            and done == len(expected)
            and current.settled >= report.messages
            and _bad.parked(bad, current.parked)[0] == len(bad)
        )
        if not plan.settled and complete and plan.chaos_done(report):
            plan.settled = True
            echo(f"settled after {now - started:.1f} s; waiting until the hubs stay idle for {plan.drain_idle} s")
        if plan.settled:
            size = procs.size()
            if size != plan.size:
                plan.size, plan.quiet_since = size, now
            elif now - plan.quiet_since >= plan.drain_idle:
                return
        time.sleep(_TICK)


def _prepare(config: HubConfig) -> None:
    """Create the tables (`edinbox init`) and refuse tables that already hold invoices or settled interchanges."""
    asyncio.run(on_inbox(config, lambda inbox: init(inbox, config=config)))
    before = asyncio.run(tally(config))
    if before.invoices or before.settled:
        raise ConfigurationError(
            f"{mask(config.db)} (journal {config.table}) already holds invoices or settled interchanges: chaos "
            "counts from an empty start; pass a fresh --table (a new schema on PostgreSQL) or a new SQLite file"
        )


def _comeback(source: str) -> float:
    """Seconds a killed hub's deliveries take to come back to another hub: the source's ack_wait, but none on the
    spool, whose next recovery takes a dead hub's claims back without waiting for `claim_timeout` (`_DRAIN_IDLE`),
    and the source's own `comeback` where it says (SFTP: another hub's next listings, its holds being its own)."""
    opened = open_source(source, consumer=CONSUMER)
    if isinstance(opened, SpoolSource):
        return 0.0
    return float(getattr(opened, "comeback", opened.ack_wait or 0.0))


def run_chaos(
    *,
    source: str,
    db: str,
    table: str | None = None,
    messages: int = 200,
    duplicates: int = 50,
    hubs: int = 3,
    kill_every: float = 2.0,
    restart_db_command: str | None = None,
    timeout: float = 300.0,
    drain_idle: float | None = None,
    seed: int = 7,
    batch_size: int = 10,
    poison: int = 0,
    huge: int = 0,
    workdir: Path | None = None,
    echo: Callable[[str], None] = lambda text: None,
) -> ChaosReport:
    """Publish (with `poison` and `huge` bad deliveries among the good ones), run hubs under kills (and a database
    restart), wait until settled and drained, and count."""
    started = time.monotonic()
    workdir = (workdir or Path(tempfile.mkdtemp(prefix="edinbox-chaos-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    table = table or _fresh_table(db)
    config = HubConfig(db=db, table=table, consumer=CONSUMER, source=source, batch_size=batch_size)
    settings, partner = None, None
    if source.startswith("as2:"):  # pushed by a partner while the hubs run, each message until its MDN
        config, settings = _chaos_as2.agreed(config, workdir)
        partner = _chaos_as2.Partner(config, workdir, deadline=started + timeout)
    _prepare(config)
    if drain_idle is None:  # a killed hub's deliveries come back after the source's ack_wait
        drain_idle = max(_DRAIN_IDLE, _comeback(source) + 2.0)
    rng = random.Random(seed ^ 0xC4A05)  # noqa: S311 - a kill schedule, not security
    mixed = _mixed(messages, duplicates, poison=poison, huge=huge, seed=seed, max_payload=config.max_payload, rng=rng)
    if partner is None:
        asyncio.run(_bad.publish_mixed(source, mixed.first, alone=()))
        echo(f"published {len(mixed.first)} deliveries to {mask(source)}; hubs log to {workdir}/hubs.log")
    report = ChaosReport(
        source=mask(source),
        db=mask(db),
        table=table,
        log=str(workdir / "hubs.log"),
        messages=mixed.files,
        duplicates=mixed.copies,
        hubs=hubs,
        batch_size=batch_size,
        poison=len(mixed.poisoned),
        huge=len(mixed.blobs),
        expected=len(mixed.expected),
    )
    plan = _Schedule(kill_every, restart_db_command, drain_idle, deadline=started + timeout)
    with open(workdir / "hubs.log", "ab") as log, _signals_noted() as terminated:
        procs = _Hubs(config, log=log, rng=rng, file=settings)
        try:
            bad = _under_chaos(
                config,
                procs,
                plan,
                report,
                mixed,
                hubs=hubs,
                partner=partner,
                workdir=workdir,
                terminated=terminated,
                echo=echo,
            )
        finally:
            if partner is not None:
                _joined(partner, echo=echo)
            procs.stop()
            if plan.restart is not None:
                plan.restart.wait()  # never leave the database half restarted
    _counted(report, _final(config), expected=mixed.expected, bad=bad)
    report.seconds = time.monotonic() - started
    return report


@dataclass
class _Mixed:
    """A run's traffic: what is published before the hubs start (`first`) and while they run (`later`), the bad
    deliveries among them, and the invoices expected."""

    files: int
    copies: int
    first: list[tuple[str, bytes]]
    later: list[tuple[str, bytes]]
    poisoned: list[_bad.Bad]
    blobs: list[_bad.Bad]
    expected: set[InvoiceKey]


def _mixed(
    messages: int, duplicates: int, *, poison: int, huge: int, seed: int, max_payload: int, rng: random.Random
) -> _Mixed:
    """The traffic of `seed`: the interchanges, `duplicates` copies drawn by `rng`, and the bad deliveries mixed in
    from a generator of their own (the same seed gives the same good traffic with or without them)."""
    traffic = generate(messages, duplicate_rate=0.0, seed=seed, mixed=False)
    expected = {(s, n, k, d.isoformat()) for s, n, k, d in traffic.invoice_keys}
    copies = rng.choices(traffic.files, k=duplicates) if traffic.files else []
    bad_rng = random.Random(seed ^ 0xBAD)  # noqa: S311 - test traffic, not security
    poisoned = _bad.poison(poison, rng=bad_rng)
    blobs = _bad.huge(huge, rng=bad_rng, max_payload=max_payload)
    first = _bad.mix(traffic.files, poisoned, rng=bad_rng)
    later = _bad.mix(copies, blobs, rng=bad_rng)
    return _Mixed(len(traffic.files), len(copies), first, later, poisoned, blobs, expected)


def _under_chaos(
    config: HubConfig,
    procs: _Hubs,
    plan: _Schedule,
    report: ChaosReport,
    mixed: _Mixed,
    *,
    hubs: int,
    partner: _chaos_as2.Partner | None,
    workdir: Path,
    terminated: list[int],
    echo: Callable[[str], None],
) -> list[_bad.Bad]:
    """Start the hubs, send what comes while they run (or start the AS2 partner), and drive them to the end under
    kills; return the bad deliveries that reached them (those the source refused are not counted)."""
    later = mixed.later
    for _ in range(hubs):
        procs.start(armed=True)
    if partner is not None:  # the redeliveries are resends of sent messages under their first Message-ID
        partner.start(mixed.first, later)
        echo(f"sending {len(mixed.first)} AS2 messages to {mask(config.source)}; hubs log to {workdir}/hubs.log")
        later = []
    if later:  # redeliveries of published interchanges and the huge deliveries, while the hubs run
        report.refused = _publish_later(config.source, later, alone={b.key for b in mixed.blobs}, echo=echo)
    bad = [b for b in mixed.poisoned + mixed.blobs if b.key not in report.refused]
    mixed.expected |= {b.invoice for b in bad if b.invoice is not None}  # the good invoice beside a huge bad part
    report.expected = len(mixed.expected)
    _drive(
        config,
        procs,
        plan,
        report,
        expected=mixed.expected,
        bad=bad,
        workdir=workdir,
        terminated=terminated,
        echo=echo,
    )
    return bad


def _fresh_table(db: str) -> str:
    """The journal of a run that names none: in a PostgreSQL schema or MariaDB database of its own (a second run
    never meets the first one's invoices), else `inbox`."""
    fresh = f"edinbox_chaos_{uuid.uuid4().hex[:8]}"
    return f"{fresh}.inbox" if database_url(db).dialect in ("postgresql", "mysql") else "inbox"


def _publish_later(
    source: str, later: list[tuple[str, bytes]], *, alone: set[str], echo: Callable[[str], None]
) -> dict[str, str]:
    """Publish the deliveries sent while the hubs run; return those the source refused (said, and not counted)."""
    sent = asyncio.run(_bad.publish_mixed(source, later, alone=alone))
    for key, reason in sent.refused.items():
        echo(f"{key} not published, the source refused it (not counted): {reason}")
    return sent.refused


def _joined(partner: _chaos_as2.Partner, *, echo: Callable[[str], None]) -> None:
    """Wait for the AS2 partner's thread and say what it was answered."""
    partner.join()
    failed = f"; never answered: {', '.join(partner.failed[:5])}" if partner.failed else ""
    echo(f"AS2: {partner.answered} answered ({partner.negative} negative) in {partner.tries} tries{failed}")


def _counted(report: ChaosReport, final: Tally, *, expected: set[InvoiceKey], bad: list[_bad.Bad]) -> None:
    """Fill in `report` from the database's tally once the hubs stopped: what was lost, doubled, parked or stray."""
    missing = sorted(expected - final.invoices)
    report.invoices = len(expected) - len(missing)
    report.effects, report.settled, report.suppressed = final.effects, final.settled, final.suppressed
    report.lost = len(missing)
    report.missing = [f"{s}/{n} ({k}, {d})" for s, n, k, d in missing[:5]]
    report.doubled = max(0, final.effects - final.settled)
    report.parked, report.parked_twice = _bad.parked(bad, final.parked)
    report.stray = len(final.invoices - expected)
