"""The cost of one exactly-once effect on PostgreSQL with fsync on, beside a bare transaction and a hand-written inbox.

    .venv/bin/python -m bench.effect_cost [--seconds 10] [--rounds 2] [--kill-every 2] [--phases quiet,snapshot,killed]
        [--folder DIR] [--url postgresql://...]

A private cluster (`tests.servers.PrivatePostgres` in `--folder`, or a temporary one) with fsync and
synchronous_commit on and pg_stat_statements loaded; with `--url`, a server of your own instead (its settings as
they are, the server's time per effect only when pg_stat_statements is loaded there). Each variant is a consumer
process of its own (`--consume`) with a database of its own (`effect_bare`, `effect_hand`, `effect_inbox`, created
when missing and kept), so that the server's statistics tell the variants apart:

- `bare`: BEGIN, the business INSERT, COMMIT: no protection against a redelivery;
- `hand-written`: an Eventuate-style inbox, INSERT ... ON CONFLICT DO NOTHING into a 3-column table, the business
  INSERT when the key was new, COMMIT;
- `Inbox.process`: the business INSERT as the handler.

This process is the broker: it hands each consumer message ids on its stdin (64 in flight) and takes them as
acknowledged when the consumer writes them back after its commit; a message not acknowledged is handed again.
Phases, the variants taking turns of `--seconds` (order rotated each round):

- `quiet`: nothing else happens;
- `snapshot`: another session in each variant's database holds a REPEATABLE READ snapshot taken before the phase
  (the xmin horizon held for the whole phase, about a minute with the defaults): what vacuum cannot remove piles up;
- `killed`: the consumer is SIGKILLed every `--kill-every` seconds and started again; the messages it had not
  acknowledged are handed again (redelivered), so a bare transaction may apply an effect twice.

Per variant and phase: effects per second and the wall time per effect (the restarts' start-up excluded: the time
from a kill until the new consumer says it is ready), ratios to the bare transaction and to the hand-written inbox,
the server's execution time and WAL per effect (pg_stat_statements, every statement of the variant's database
summed, COMMIT's flush included), the dead tuples left in its tables, and the check of the business rows against
the messages handed out: `lost` (no row), `doubled` (a second row).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import selectors
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
from tests.servers import PrivatePostgres

VARIANTS = ("bare", "hand-written", "Inbox.process")
DATABASES = {"bare": "effect_bare", "hand-written": "effect_hand", "Inbox.process": "effect_inbox"}
CONSUMER = "bench"
WINDOW = 64
"""Messages handed to a consumer and not yet acknowledged, at most."""
ACK_EVERY = 16
"""A consumer acknowledges the messages it applied in groups of this many (or fewer, when no more are waiting):
a kill between a commit and its group's acknowledgment hands those messages again."""
PAYLOAD = b"x" * 200
SERVER = {
    "fsync": "on",
    "synchronous_commit": "on",
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track": "top",
    "shared_buffers": "256MB",
    "track_wal_io_timing": "on",
}
WAL = b"SELECT wal_bytes, wal_fpi, wal_sync, wal_sync_time FROM pg_stat_wal"
"""The cluster's WAL counters: bytes, full-page images, flushes and the milliseconds they took (the commits' fsync
outside any statement's time); read around each turn, the variants' turns never overlap."""


def consume(url: str, variant: str) -> None:
    """The consumer: apply each message id read from stdin once, write it back after its commit."""
    connection = psycopg.connect(url)
    business = b"INSERT INTO business (message_id, body) VALUES (%s, %s)"
    received = b"INSERT INTO received (consumer, message_id, received_at) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"
    if variant == "Inbox.process":
        from edinbox import Inbox, Message, Tx

        inbox = Inbox(url, consumer=CONSUMER, table="journal")

        def handler(tx: Tx, message: Message) -> None:
            tx.connection.execute(business, (message.message_id, message.payload))

        def apply(message_id: str) -> None:
            inbox.process(Message(message_id, "bench:source", PAYLOAD), handler)

    elif variant == "hand-written":

        def apply(message_id: str) -> None:
            if connection.execute(received, (CONSUMER, message_id, int(time.time() * 1000))).rowcount == 1:
                connection.execute(business, (message_id, PAYLOAD))
            connection.commit()

    else:

        def apply(message_id: str) -> None:
            connection.execute(business, (message_id, PAYLOAD))
            connection.commit()

    os.write(1, b"ready\n")
    pending = b""
    while chunk := os.read(0, 65536):
        *lines, pending = (pending + chunk).split(b"\n")
        for start in range(0, len(lines), ACK_EVERY):  # acknowledged in groups, as a consumer of a broker does
            for line in lines[start : start + ACK_EVERY]:
                apply(line.decode())
            os.write(1, b"".join(line + b"\n" for line in lines[start : start + ACK_EVERY]))


@dataclass
class Turn:
    """What one variant did in one turn."""

    sent: int = 0
    seconds: float = 0.0
    down: float = 0.0
    kills: int = 0
    wal: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0)
    redelivered: int = 0
    ids: list[str] = field(default_factory=list)


class Broker:
    """Hands message ids to one consumer process, takes back its acknowledgments, redelivers after a kill."""

    def __init__(self, url: str, variant: str) -> None:
        """The consumer's command line (its database's URL, its variant)."""
        self.command = [sys.executable, "-m", "bench.effect_cost", "--consume", variant, "--url", url]
        self.process: subprocess.Popen[bytes] | None = None
        self.pending = b""

    def start(self) -> float:
        """Start the consumer, wait for its 'ready'; return the seconds that took."""
        started = time.perf_counter()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        self.process = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.pending = b""
        if self._lines(timeout=60) != ["ready"]:
            raise RuntimeError("the consumer did not start")
        return time.perf_counter() - started

    def kill(self) -> list[str]:
        """SIGKILL the consumer; return the acknowledgments it wrote before it died."""
        assert self.process is not None
        assert self.process.stdout is not None
        assert self.process.stdin is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        rest = self.pending + self.process.stdout.read()
        self.process.stdout.close()
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.close()
        return [line.decode() for line in rest.split(b"\n")[:-1]]

    def run(self, prefix: str, *, seconds: float, kill_every: float | None) -> Turn:
        """Hand out fresh messages for `seconds` (killing the consumer every `kill_every`), then drain; the turn."""
        turn = Turn()
        in_flight: deque[str] = deque()
        turn.down += self.start()
        started = time.perf_counter()
        next_kill = started + kill_every if kill_every else None
        while time.perf_counter() - started - turn.down < seconds:
            if next_kill is not None and time.perf_counter() >= next_kill:
                self._acknowledge(in_flight, self.kill())
                turn.kills += 1
                turn.redelivered += len(in_flight)
                turn.down += self.start()
                self._send(list(in_flight))
                next_kill = time.perf_counter() + (kill_every or 0)
            fresh = [f"{prefix}-{turn.sent + i}" for i in range(WINDOW - len(in_flight))]
            turn.sent += len(fresh)
            turn.ids.extend(fresh)
            in_flight.extend(fresh)
            self._send(fresh)
            self._acknowledge(in_flight, self._lines(timeout=0.05))
        assert self.process is not None
        assert self.process.stdin is not None
        self.process.stdin.close()
        while in_flight:
            acks = self._lines(timeout=30)
            if not acks:
                raise RuntimeError(f"the consumer stopped with {len(in_flight)} messages unacknowledged")
            self._acknowledge(in_flight, acks)
        self.process.wait()
        turn.seconds = time.perf_counter() - started
        return turn

    def _send(self, ids: list[str]) -> None:
        assert self.process is not None
        assert self.process.stdin is not None
        if ids:
            self.process.stdin.write("".join(f"{one}\n" for one in ids).encode())
            self.process.stdin.flush()

    def _lines(self, *, timeout: float) -> list[str]:
        """The complete lines the consumer has written, waiting up to `timeout` for the first."""
        assert self.process is not None
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            if not selector.select(timeout):
                return []
        chunk = os.read(fd, 65536)
        if not chunk:
            return []
        *lines, self.pending = (self.pending + chunk).split(b"\n")
        return [line.decode() for line in lines]

    @staticmethod
    def _acknowledge(in_flight: deque[str], acks: list[str]) -> None:
        """Drop the acknowledged ids: the consumer works through its stdin in order, so they lead `in_flight`."""
        for ack in acks:
            if in_flight[0] != ack:
                raise RuntimeError(f"acknowledged {ack!r} out of order (expected {in_flight[0]!r})")
            in_flight.popleft()


def setup(url: str, admin: psycopg.Connection[Any]) -> dict[str, str]:
    """Create each variant's database and tables (kept between runs); return each variant's URL."""
    urls = {}
    for variant, name in DATABASES.items():
        if not admin.execute(b"SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchall():
            admin.execute(f"CREATE DATABASE {name}".encode())
        urls[variant] = urlsplit(url)._replace(path=f"/{name}").geturl()
        with psycopg.connect(urls[variant], autocommit=True) as connection:
            connection.execute(b"CREATE TABLE IF NOT EXISTS business (message_id text NOT NULL, body bytea)")
            connection.execute(
                b"CREATE TABLE IF NOT EXISTS received (consumer text NOT NULL, message_id text NOT NULL, "
                b"received_at bigint NOT NULL, PRIMARY KEY (consumer, message_id))"
            )
    from edinbox import Inbox

    with Inbox(urls["Inbox.process"], consumer=CONSUMER, table="journal") as inbox:
        inbox.create_schema()
    return urls


def checked(url: str, turn: Turn, prefix: str) -> tuple[int, int]:
    """(lost, doubled): the messages of the turn with no business row, the rows beyond one per message."""
    with psycopg.connect(url) as connection:
        rows, distinct = connection.execute(
            b"SELECT count(*), count(DISTINCT message_id) FROM business WHERE message_id LIKE %s", (prefix + "-%",)
        ).fetchall()[0]
    return turn.sent - distinct, rows - distinct


def server_figures(admin: psycopg.Connection[Any], urls: dict[str, str]) -> dict[str, tuple[float, int]]:
    """Per variant: the statements' execution time (ms) since the reset, and its tables' dead tuples."""
    figures = {}
    for variant, name in DATABASES.items():
        try:
            ms = admin.execute(
                b"SELECT coalesce(sum(s.total_exec_time), 0) FROM pg_stat_statements s "
                b"JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = %s",
                (name,),
            ).fetchall()[0][0]
        except (psycopg.errors.UndefinedTable, psycopg.errors.ObjectNotInPrerequisiteState):  # not loaded
            ms = float("nan")
        with psycopg.connect(urls[variant], autocommit=True) as connection:
            dead = connection.execute(b"SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables").fetchall()[0][0]
        figures[variant] = (float(ms), int(dead))
    return figures


def hold_snapshots(urls: dict[str, str]) -> list[psycopg.Connection[Any]]:
    """In each variant's database, a session holding a REPEATABLE READ snapshot (its xmin) until closed."""
    holders = []
    for url in urls.values():
        holder = psycopg.connect(url)
        holder.execute(b"SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        holder.execute(b"SELECT count(*) FROM business")
        holders.append(holder)
    return holders


def phase(name: str, urls: dict[str, str], admin: psycopg.Connection[Any], args: argparse.Namespace) -> None:
    """Run the variants' turns of one phase and print its table."""
    kill_every = args.kill_every if name == "killed" else None
    with contextlib.suppress(psycopg.errors.UndefinedFunction, psycopg.errors.ObjectNotInPrerequisiteState):
        admin.execute(b"SELECT pg_stat_statements_reset()")
    holders = hold_snapshots(urls) if name == "snapshot" else []
    held = time.perf_counter()
    load = os.getloadavg()[0]
    turns: dict[str, list[Turn]] = {variant: [] for variant in VARIANTS}
    verdicts = {variant: [0, 0] for variant in VARIANTS}
    order = list(VARIANTS)
    for round_ in range(args.rounds):
        order = order[1:] + order[:1]
        for variant in order:
            prefix = f"{name}-{round_}-{uuid.uuid4().hex[:8]}"
            before = admin.execute(WAL).fetchall()[0]
            turn = Broker(urls[variant], variant).run(prefix, seconds=args.seconds, kill_every=kill_every)
            time.sleep(0.6)  # the WAL writer reports its counters within half a second
            turn.wal = tuple(float(b - a) for a, b in zip(before, admin.execute(WAL).fetchall()[0], strict=True))
            turns[variant].append(turn)
            lost, doubled = checked(urls[variant], turn, prefix)
            verdicts[variant][0] += lost
            verdicts[variant][1] += doubled
    figures = server_figures(admin, urls)
    for holder in holders:
        holder.close()
    rates = {v: sum(t.sent for t in ts) / sum(t.seconds - t.down for t in ts) for v, ts in turns.items()}
    print(
        f"\n## {name}: {args.rounds} rounds of {args.seconds:g} s per variant, load {load:.1f} -> "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
        + (f"; snapshots held {time.perf_counter() - held:.0f} s" if holders else "")
        + (f"; SIGKILL every {kill_every:g} s" if kill_every else "")
    )
    print(
        "| variant | effects/s | us per effect | x bare | x hand-written | per-round x hand-written | server us per "
        "effect | WAL flush us per effect | WAL bytes per effect | full-page images | dead tuples | kills | "
        "redelivered | lost | doubled |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for variant, ts in turns.items():
        effects = sum(t.sent for t in ts)
        ms, dead = figures[variant]
        wal, fpi, _, flush_ms = (sum(t.wal[i] for t in ts) for i in range(4))
        per_round = [
            (t.sent / (t.seconds - t.down)) / (h.sent / (h.seconds - h.down))
            for t, h in zip(ts, turns["hand-written"], strict=True)
        ]
        rate = rates[variant]
        print(
            f"| {variant} | {rate:,.0f} | {1e6 / rate:,.0f} | x{rate / rates['bare']:.2f} "
            f"| x{rate / rates['hand-written']:.2f} | {' '.join(f'{r:.2f}' for r in per_round)} "
            f"(median {statistics.median(per_round):.2f}) | {ms * 1000 / effects:,.0f} "
            f"| {flush_ms * 1000 / effects:,.0f} | {wal / effects:,.0f} | {fpi:,.0f} "
            f"| {dead:,} | {sum(t.kills for t in ts)} | {sum(t.redelivered for t in ts)} "
            f"| {verdicts[variant][0]} | {verdicts[variant][1]} |",
            flush=True,
        )
    if args.statements:
        statements(admin, {variant: sum(t.sent for t in ts) for variant, ts in turns.items()})


def statements(admin: psycopg.Connection[Any], effects: dict[str, int]) -> None:
    """Print each variant's statements (pg_stat_statements): calls, mean execution time and WAL per call."""
    print("| variant | statement | calls per effect | mean us | WAL bytes per call | buffers hit per call |")
    print("|---|---|---|---|---|---|")
    for variant, name in DATABASES.items():
        rows = admin.execute(
            b"SELECT regexp_replace(s.query, '\\s+', ' ', 'g'), s.calls, s.mean_exec_time, s.wal_bytes, "
            b"s.shared_blks_hit FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid "
            b"WHERE d.datname = %s AND s.calls >= %s ORDER BY s.total_exec_time DESC",
            (name, effects[variant] // 2),
        ).fetchall()
        for query, calls, mean, wal, hit in rows:
            print(
                f"| {variant} | `{query[:90]}` | {calls / effects[variant]:.2f} | {mean * 1000:.1f} "
                f"| {float(wal) / calls:,.0f} | {hit / calls:.1f} |"
            )


def main() -> None:
    """Start (or reach) the server, create the variants' databases, run the phases."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a server of your own (default: a private cluster)")
    parser.add_argument("--folder", type=Path, help="the private cluster's folder (kept; default: a temporary one)")
    parser.add_argument("--seconds", type=float, default=10.0, help="per variant and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--kill-every", type=float, default=2.0, help="seconds between SIGKILLs in the killed phase")
    parser.add_argument("--phases", default="quiet,snapshot,killed")
    parser.add_argument("--statements", action="store_true", help="also each variant's statements, per phase")
    parser.add_argument("--consume", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.consume:
        consume(args.url, args.consume)
        return
    server = None
    if args.url is None:
        server = PrivatePostgres(args.folder.resolve() if args.folder else None, settings=SERVER)
        server.start()
        args.url = server.url
    try:
        with psycopg.connect(args.url, autocommit=True) as admin:
            admin.execute(b"CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            shown = ", ".join(
                f"{name}={admin.execute(f'SHOW {name}'.encode()).fetchall()[0][0]}"
                for name in ("fsync", "synchronous_commit", "full_page_writes", "shared_buffers", "wal_level")
            )
            print(f"PostgreSQL {admin.info.server_version}: {shown}")
            urls = setup(args.url, admin)
            for name in args.phases.split(","):
                phase(name, urls, admin, args)
    finally:
        if server is not None:
            server.__exit__(None, None, None)


if __name__ == "__main__":
    main()
