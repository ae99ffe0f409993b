"""What a failover loses: acknowledged commits missing on the promoted standby, asynchronous against synchronous
replication, side by side in one run.

    .venv/bin/python -m bench.failover [--failovers 10] [--writers 4] [--rows 10] [--rate 0] [--after 1.0]
        [--lag-ms 0]

For each of `--failovers` turns (the two modes alternating, so load from elsewhere falls on both), a private primary
and streaming standby (tests/servers_ha.py: pg_basebackup, loopback, `fsync=off`) are started, asynchronous
(`synchronous_standby_names` empty) or synchronous (`'*'`, `synchronous_commit=on`); the standby streams through
a relay that delays every chunk `--lag-ms` each way (a network between two zones). `--writers` threads, each on a
connection of its own to the primary, commit transactions of `--rows` rows of 1 KB (a hub batch's journal rows and
invoices, roughly), back to back or `--rate` commits per second each, and note every id whose COMMIT returned: the
point where the hub acks the broker. After `--after` seconds (x 0.5 to 1.5 at random) the primary is lost with its
zone: the relay is cut (what is in flight never arrives), the primary stopped at once (`pg_ctl stop -m immediate`,
its processes killed as in a crash) and the standby promoted. Then:

- `lost`: acknowledged transactions missing on the promoted server (for the hub: deliveries acked, effects gone);
- `in doubt`: transactions on the promoted server whose COMMIT never returned (the hub redelivers them: duplicates
  the journal suppresses, nothing lost);
- `behind`: the WAL the primary had written and the standby had not received, read just before the cut.

It prints, per mode, the commits per second, the acknowledged and lost transactions over all turns, the turns that
lost any and the most one turn lost. The window is the replication lag: about the commits of the last lag's worth
of time, plus whatever a busy or slow standby has not received yet (`pg_stat_replication.write_lag`).
"""

from __future__ import annotations

import argparse
import contextlib
import queue
import random
import socket
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the private servers of the tests
from servers_ha import PrivatePostgresPair

PAYLOAD = "x" * 1024


class Link:
    """A TCP relay on loopback between the standby and the primary that delays every chunk by `lag` seconds each
    way (a network between two zones); `cut()` drops the connections and whatever is still in flight on them (the
    primary's zone lost with it)."""

    def __init__(self, target: int, lag: float) -> None:
        self.target, self.lag = target, lag
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.sockets: list[socket.socket] = [self.listener]
        self.cutting = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.cutting.is_set():
            try:
                inner, _ = self.listener.accept()
            except OSError:
                return
            try:
                outer = socket.create_connection(("127.0.0.1", self.target))
            except OSError:  # the primary is gone: the standby's walreceiver tries again meanwhile
                inner.close()
                continue
            self.sockets += [inner, outer]
            for source, sink in ((inner, outer), (outer, inner)):
                chunks: queue.Queue[tuple[float, bytes]] = queue.Queue()
                threading.Thread(target=self._read, args=(source, chunks), daemon=True).start()
                threading.Thread(target=self._write, args=(sink, chunks), daemon=True).start()

    def _read(self, source: socket.socket, chunks: queue.Queue[tuple[float, bytes]]) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            chunks.put((time.monotonic() + self.lag, data))
            if not data:
                return

    def _write(self, sink: socket.socket, chunks: queue.Queue[tuple[float, bytes]]) -> None:
        while True:
            due, data = chunks.get()
            time.sleep(max(0.0, due - time.monotonic()))
            if not data or self.cutting.is_set():
                with contextlib.suppress(OSError):
                    sink.shutdown(socket.SHUT_WR)
                return
            try:
                sink.sendall(data)
            except OSError:
                return

    def cut(self) -> None:
        """Close every connection at once: nothing in flight arrives."""
        self.cutting.set()
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.close()


@dataclass
class Turn:
    """One failover: what the writers saw acknowledged and what the promoted server holds."""

    seconds: float = 0.0
    behind: int = 0
    """Bytes of WAL the primary had written and the standby had not received when the link was cut."""
    acked: set[int] = field(default_factory=set)
    present: set[int] = field(default_factory=set)

    @property
    def lost(self) -> int:
        """Acknowledged transactions missing after the failover."""
        return len(self.acked - self.present)

    @property
    def in_doubt(self) -> int:
        """Transactions present after the failover whose COMMIT never returned to the writer."""
        return len(self.present - self.acked)


def _writer(url: str, first: int, *, step: int, rows: int, rate: float, turn: Turn, lock: threading.Lock) -> None:
    """Commit transactions of `rows` rows, ids `first`, `first + step`, ...; note each acknowledged one; stop at the
    first error (the primary is gone)."""
    pause = 1.0 / rate if rate else 0.0
    try:
        with psycopg.connect(url) as conn:
            n = first
            while True:
                with conn.transaction():
                    conn.cursor().executemany(
                        "INSERT INTO acked (id, part, payload) VALUES (%s, %s, %s)",
                        [(n, part, PAYLOAD) for part in range(rows)],
                    )
                with lock:
                    turn.acked.add(n)
                n += step
                if pause:
                    time.sleep(pause)
    except psycopg.Error:
        return


def _through(pair: PrivatePostgresPair, link: Link) -> None:
    """Make the standby stream through `link` and wait until it does."""
    standby = pair.standby.url if pair.standby else ""
    with psycopg.connect(standby, autocommit=True) as conn:
        conninfo = f"host=127.0.0.1 port={link.port} user=postgres application_name=bench"
        conn.execute(psycopg.sql.SQL("ALTER SYSTEM SET primary_conninfo = {}").format(conninfo))
        conn.execute("SELECT pg_reload_conf()")
        deadline = time.monotonic() + 30
        while conn.execute("SELECT sender_port FROM pg_stat_wal_receiver WHERE status = 'streaming'").fetchone() != (
            link.port,
        ):
            if time.monotonic() > deadline:
                raise RuntimeError("the standby does not stream through the link")
            time.sleep(0.05)
    pair.wait_streaming()


def failover_turn(*, synchronous: bool, writers: int, rows: int, rate: float, after: float, lag: float) -> Turn:
    """Start a pair, write until the primary is lost mid-stream (with its link to the standby), promote the
    standby, and compare."""
    turn, lock = Turn(), threading.Lock()
    with PrivatePostgresPair(synchronous=synchronous) as pair:
        link = Link(pair.primary.port, lag)
        _through(pair, link)
        with psycopg.connect(pair.primary.url, autocommit=True) as conn:
            conn.execute("CREATE TABLE acked (id bigint, part int, payload text, PRIMARY KEY (id, part))")
        shared = {"step": writers, "rows": rows, "rate": rate, "turn": turn, "lock": lock}
        threads = [
            threading.Thread(target=_writer, args=(pair.primary.url, i), kwargs=shared, daemon=True)
            for i in range(writers)
        ]
        began = time.monotonic()
        for thread in threads:
            thread.start()
        time.sleep(after * random.uniform(0.5, 1.5))
        with psycopg.connect(pair.primary.url, autocommit=True) as conn:
            row = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), write_lsn) FROM pg_stat_replication")
            turn.behind = int((row.fetchone() or (0,))[0] or 0)
        link.cut()
        pair.failover()
        turn.seconds = time.monotonic() - began
        for thread in threads:
            thread.join(timeout=30)
        with psycopg.connect(pair.url, autocommit=True) as conn:
            turn.present = {int(row[0]) for row in conn.execute("SELECT DISTINCT id FROM acked")}
    return turn


def main() -> None:
    """Run the turns and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--failovers", type=int, default=10, help="failovers per mode")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--rows", type=int, default=10, help="rows of 1 KB per transaction")
    parser.add_argument("--rate", type=float, default=0.0, help="commits per second per writer (0: back to back)")
    parser.add_argument("--after", type=float, default=1.0, help="seconds of writing before a failover (x 0.5-1.5)")
    parser.add_argument("--lag-ms", type=float, default=0.0, help="one-way delay between primary and standby")
    options = parser.parse_args()
    turns: dict[str, list[Turn]] = {"asynchronous": [], "synchronous": []}
    for n in range(options.failovers * 2):
        mode = ("asynchronous", "synchronous")[n % 2]
        turns[mode].append(
            failover_turn(
                synchronous=mode == "synchronous",
                writers=options.writers,
                rows=options.rows,
                rate=options.rate,
                after=options.after,
                lag=options.lag_ms / 1000,
            )
        )
    print(
        f"\n{options.failovers} failovers per mode, {options.writers} writers, {options.rows} rows of 1 KB per commit, "
        f"{'back to back' if not options.rate else f'{options.rate:g} commits/s each'}, "
        f"{options.lag_ms:g} ms each way between primary and standby:"
    )
    print(
        "| replication | commits/s | acknowledged | lost | turns that lost | most in one turn | in doubt "
        "| standby behind at the cut (median, max) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for mode, done in turns.items():
        acked = sum(len(t.acked) for t in done)
        rate = acked / sum(t.seconds for t in done)
        lost, behind = [t.lost for t in done], [t.behind for t in done]
        print(
            f"| {mode} | {rate:.0f} | {acked} | {sum(lost)} | {sum(1 for x in lost if x)} of {len(done)} "
            f"| {max(lost)} | {sum(t.in_doubt for t in done)} "
            f"| {statistics.median(behind) / 1024:.0f} KiB, {max(behind) / 1024:.0f} KiB |"
        )


if __name__ == "__main__":
    main()
