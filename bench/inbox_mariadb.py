"""Inbox cost per message on MariaDB against a naive hand-written inbox, factor by factor, side by side.

    .venv/bin/python -m bench.inbox_mariadb [--url mysql://root@127.0.0.1:3306/test | --private] [--turns 150]
        [--chunk 20] [--batch 50] [--joined] [--only joined] [--postgres URL]

1. One message per transaction. A naive hand-written inbox (INSERT IGNORE into a 3-column journal with a unique
   key, the business INSERT if it inserted, COMMIT) against `Inbox.process` with the same business INSERT in its
   handler, and between them the naive inbox with one difference at a time:
   - "naive, handler's cursor": the business INSERT made by `Inbox.process`'s handler itself (called with a `Tx` of
     the connection: it opens a cursor of its own per message, as a handler given a connection must), instead of on
     the naive inbox's one cursor for all the messages of a turn;
   - "naive, edinbox journal": the journal's own table and INSERT (`insert_processed`: every column it writes)
     instead of the 3-column one: on the wire exactly what `Inbox.process` sends;
   - "naive, journal, handler": both of the above (so the difference between this one and `Inbox.process` is the
     inbox's own client Python);
   - "naive, quick" and "naive, journal, handler, quick": the naive inbox, and the one before, on the class
     of the store's own connections (`QuickReplies`: OK replies read in fewer steps than PyMySQL's), so that the
     inbox's own Python can be told apart from its connection's faster reading of replies;
   - "naive + mark": the 3-column table, with `SAVEPOINT edinbox_tx` in the INSERT's query and `RELEASE SAVEPOINT
     edinbox_tx; COMMIT` as the last query, as the store sent them before it watched its connections' replies
     instead (two statements in each: two replies);
   - "naive + mark, one reply": the release and the COMMIT as one compound statement (`BEGIN NOT ATOMIC ... END`:
     one reply, so the client wakes up once instead of twice while the COMMIT flushes the log), an alternative;
   - "naive + mark, blocks": the first query a compound statement too (`SAVEPOINT` then the INSERT, one reply);
   - "naive, journal + mark": both differences, what `Inbox.process` sent before.
   Every naive connection gets the store's own session settings (READ COMMITTED, strict mode, autocommit off) and
   multi-statements, so isolation and durability are the same for all; each variant has a journal of its own.
2. A batch per transaction: `Inbox.process_batch` (one `INSERT IGNORE ... RETURNING` for the batch, the handler's
   executemany, COMMIT) against a naive batch (one multi-row INSERT IGNORE ... RETURNING into the 3-column journal,
   the same executemany of the rows it returned, COMMIT).
3. With `--joined`: joining the caller's transaction, on MariaDB and on PostgreSQL: `Inbox(raw_connection).process`
   then the caller's COMMIT, against `inbox.process(..., session=session)` then `session.commit()`. `--only joined`
   runs this comparison alone.

The variants take turns on `--chunk` fresh messages each, the order rotated every turn, so load from elsewhere hits
them alike; each turn gives each variant a rate, and a ratio is the median over the turns of the per-turn ratios
(with the 10th-90th percentile range of those ratios). The client's CPU time per message is measured per variant
(`time.thread_time`), and so are the queries (COM_QUERY packets: one round trip each), the reply packets PyMySQL
reads and the socket reads (recv calls: each a wake-up of the client) per message.

`--private` runs everything on a MariaDB server of the bench's own (tests.servers.PrivateMariaDB, same
`innodb_flush_log_at_trx_commit` as the shared server unless `--flush 2`), so other users of the shared server do
not weigh on one variant's turn.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from typing import Any

import pymysql
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from bench.inbox_pg import batches
from edinbox import Inbox, Message, Tx
from edinbox._core import parse_table
from edinbox._plan import key_params
from edinbox.stores._mysql_sql import Statements, connect_options

try:
    from edinbox.stores._pymysql_replies import QuickReplies
except ImportError:  # an edinbox from before it, compared with this one: no "quick" variants
    QuickReplies = None

CONSUMER = "bench"
Variant = Callable[[list[Message]], None]


def server_cpu(pid: int | None) -> float:
    """The CPU time (seconds) the server's threads have used so far (0 when the server is not ours to watch)."""
    if pid is None:
        return 0.0
    used = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as stat:
                used += int(stat.read().split()[0])
        except (OSError, ValueError):  # a thread that ended meanwhile
            continue
    return used / 1e9


def paired(
    title: str,
    variants: Mapping[str, Variant],
    *,
    turns: int,
    chunk: int,
    base: str,
    size: int = 1,
    server: int | None = None,
) -> dict[str, float]:
    """Run the variants turn by turn on `chunk` fresh units of `size` messages each (order rotated every turn);
    print each variant's rate, the client's and the server's (pid `server`) CPU per message and the median per-turn
    ratio to `base`; return those medians."""
    for warm_name, warm in variants.items():  # warm-up: connections, caches, the tables' first pages
        for _ in range(3):
            warm(batches(f"warm-{warm_name}-{uuid.uuid4().hex[:6]}-", 1, chunk * size)[0])
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    cpu = dict.fromkeys(variants, 0.0)
    served = dict.fromkeys(variants, 0.0)
    order = list(variants)
    for turn in range(turns):
        order = order[1:] + order[:1]
        for name in order:
            messages = batches(f"{name[:12]}-{turn}-{uuid.uuid4().hex[:6]}-", 1, chunk * size)[0]
            started_server = server_cpu(server)
            started, started_cpu = time.perf_counter(), time.thread_time()
            variants[name](messages)
            cpu[name] += time.thread_time() - started_cpu
            seconds[name].append(time.perf_counter() - started)
            served[name] += server_cpu(server) - started_server
    total = turns * chunk * size
    print(f"\n## {title}\n   ({turns} turns of {chunk * size} messages per variant, order rotated each turn)")
    print(
        f"  {'variant':<31} {'msg/s':>9}  {'CPU us/msg: client':>18} {'server':>6}  ratio to {base}: median [p10-p90]"
    )
    medians: dict[str, float] = {}
    for name, times in seconds.items():
        ratios = sorted(b / t for b, t in zip(seconds[base], times, strict=True))  # rate ratio = time ratio inverted
        medians[name] = statistics.median(ratios)
        deciles = statistics.quantiles(ratios, n=10) if len(ratios) > 1 else ratios
        print(
            f"  {name:<31} {total / sum(times):>9,.0f}  {cpu[name] / total * 1e6:>18,.0f} "
            f"{f'{served[name] / total * 1e6:,.0f}' if server else '-':>6}  "
            f"x{medians[name]:.3f} [{deciles[0]:.2f}-{deciles[-1]:.2f}]"
        )
    return medians


@contextmanager
def wire() -> Iterator[dict[str, Any]]:
    """Count what PyMySQL does on the wire meanwhile: the queries it sends (each as the first two words of its
    statements), the reply packets it reads and the socket reads (recv calls) under them."""
    seen: dict[str, Any] = {"queries": [], "packets": 0, "recvs": 0}
    connection = pymysql.connections.Connection
    execute, read = connection._execute_command, connection._read_packet
    readinto = socket.SocketIO.readinto

    def counted_execute(self: Any, command: int, sql: Any) -> Any:
        if command == pymysql.constants.COMMAND.COM_QUERY:
            query = sql.decode(errors="replace") if isinstance(sql, bytes) else str(sql)
            seen["queries"].append("; ".join(" ".join(part.split()[:2]) for part in query.split(";\n")))
        return execute(self, command, sql)

    def counted_read(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen["packets"] += 1
        return read(self, *args, **kwargs)

    def counted_readinto(self: Any, buffer: Any) -> Any:
        seen["recvs"] += 1
        return readinto(self, buffer)

    connection._execute_command = counted_execute
    connection._read_packet = counted_read
    socket.SocketIO.readinto = counted_readinto  # type: ignore[assignment]
    quick = sys.modules.get("edinbox.stores._pymysql_replies")
    read_ok = quick and quick._ok  # an OK reply read without `_read_packet` (QuickReplies)

    def counted_ok(connection: Any) -> Any:
        ok = read_ok(connection)
        seen["packets"] += ok is not None
        return ok

    if quick:
        quick._ok = counted_ok
    try:
        yield seen
    finally:
        connection._execute_command = execute
        connection._read_packet = read
        socket.SocketIO.readinto = readinto  # type: ignore[method-assign]
        if quick:
            quick._ok = read_ok


def print_wire(variants: Mapping[str, Variant], *, count: int = 100, size: int = 1) -> None:
    """Print, per message, the queries, reply packets and socket reads of each variant (`count` units of `size`)."""
    print(f"  on the wire, per message ({count * size} messages each): queries, reply packets, socket reads")
    for name, variant in variants.items():
        messages = batches(f"wire-{name[:12]}-{uuid.uuid4().hex[:6]}-", 1, count * size)[0]
        with wire() as seen:
            variant(messages)
        per = count * size
        sent = " | ".join(dict.fromkeys(seen["queries"]))
        print(
            f"    {name:<31} {len(seen['queries']) / per:.2f} {seen['packets'] / per:.2f} {seen['recvs'] / per:.2f}"
            f"  {sent}"
        )


def connect(url: str, statements: Statements, *, quick: bool = False) -> Any:
    """A PyMySQL connection with the store's own options (autocommit off, multi-statements) and session; `quick`: the
    store's own connection class, whose OK replies are read in fewer steps (`edinbox.stores._pymysql_replies`)."""
    connection = (QuickReplies if quick and QuickReplies else pymysql.connect)(**connect_options(url))
    with connection.cursor() as cursor:
        for statement in statements["session"]:
            cursor.execute(statement)  # the isolation level and sql_mode of the store's own connections
    return connection


def _naive_variant(
    url: str,
    statements: Statements,
    business: str,
    handler: Callable[[Tx, Message], None],
    *,
    journal: str,
    edinbox_row: bool,
    mark: bool,
    block: bool = False,
    first_block: bool = False,
    handler_cursor: bool = False,
    quick: bool = False,
) -> Variant:
    """The naive inbox on a connection of its own: its row in `journal` (edinbox's row when `edinbox_row`), then the
    business write (through `handler` on a cursor of its own when `handler_cursor`), with edinbox's savepoint when
    `mark` (in compound statements when `block`, `first_block`), on PyMySQL's quick replies when `quick`."""
    connection = connect(url, statements, quick=quick)
    if edinbox_row:
        insert = Statements(parse_table(journal, qualified=True))["insert_processed"][0]
    else:
        insert = f"INSERT IGNORE INTO {journal} (consumer, source, message_id) VALUES (%s, %s, %s)"
    first = f"{insert};\nSAVEPOINT edinbox_tx" if mark else insert
    last = "RELEASE SAVEPOINT edinbox_tx;\nCOMMIT" if mark else "COMMIT"
    if block:
        last = "BEGIN NOT ATOMIC RELEASE SAVEPOINT edinbox_tx; COMMIT; END"
    if first_block:
        first = f"BEGIN NOT ATOMIC SAVEPOINT edinbox_tx; {insert}; END"

    tx = Tx(connection, "mysql")

    def run(messages: list[Message]) -> None:
        with connection.cursor() as cursor:
            for m in messages:
                values: Any = key_params(CONSUMER, m) if edinbox_row else (CONSUMER, m.source, m.message_id)
                cursor.execute(first, values)
                inserted = cursor.rowcount == 1
                if mark and not first_block:
                    cursor.nextset()
                if inserted and handler_cursor:
                    handler(tx, m)  # the business write as Inbox.process's handler does it, on a cursor of its own
                elif inserted:
                    cursor.execute(business, (m.message_id, m.payload))
                if mark:
                    cursor.execute(last)
                    if not block:
                        cursor.nextset()
                else:
                    connection.commit()

    return run


def per_message(url: str, table: str, *, turns: int, chunk: int, server: int | None) -> None:
    """Naive vs Inbox.process on MariaDB, and the naive inbox with each of the differences, one at a time."""
    statements = Statements(parse_table(table, qualified=True))
    admin = connect(url, statements)
    journals = {name: f"{table}_{name}" for name in ("journal", "handler", "handler_quick", "both", "process")}
    inboxes = {name: Inbox(url, consumer=CONSUMER, table=journal) for name, journal in journals.items()}
    for inbox in inboxes.values():
        inbox.create_schema()
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {table}_business (message_id VARCHAR(100) NOT NULL, body BLOB)")
        for name in ("naive", "cursor", "quick", "mark", "block", "blocks"):
            cursor.execute(
                f"CREATE TABLE {table}_{name} (consumer VARBINARY(512) NOT NULL, source VARBINARY(512) NOT NULL, "
                "message_id VARBINARY(512) NOT NULL, received_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), "
                "UNIQUE KEY (consumer, source, message_id))"
            )
    business = f"INSERT INTO {table}_business (message_id, body) VALUES (%s, %s)"

    def handler(tx: Tx, m: Message) -> None:
        with tx.connection.cursor() as cursor:
            cursor.execute(business, (m.message_id, m.payload))

    naive_variant = partial(_naive_variant, url, statements, business, handler)

    def process(messages: list[Message]) -> None:
        for m in messages:
            inboxes["process"].process(m, handler)

    variants = {
        "naive inbox": naive_variant(journal=f"{table}_naive", edinbox_row=False, mark=False),
        "naive, handler's cursor": naive_variant(
            journal=f"{table}_cursor", edinbox_row=False, mark=False, handler_cursor=True
        ),
        "naive, edinbox journal": naive_variant(journal=journals["journal"], edinbox_row=True, mark=False),
        "naive, journal, handler": naive_variant(
            journal=journals["handler"], edinbox_row=True, mark=False, handler_cursor=True
        ),
        "naive + mark": naive_variant(journal=f"{table}_mark", edinbox_row=False, mark=True),
        "naive + mark, one reply": naive_variant(journal=f"{table}_block", edinbox_row=False, mark=True, block=True),
        "naive + mark, blocks": naive_variant(
            journal=f"{table}_blocks", edinbox_row=False, mark=True, block=True, first_block=True
        ),
        "naive, journal + mark": naive_variant(journal=journals["both"], edinbox_row=True, mark=True),
        "Inbox.process": process,
    }
    # with an edinbox from before `QuickReplies`, the same two on PyMySQL's class (the same number of variants)
    quick = ", quick" if QuickReplies is not None else ", again"
    variants[f"naive{quick}"] = naive_variant(journal=f"{table}_quick", edinbox_row=False, mark=False, quick=True)
    variants[f"naive, journal, handler{quick}"] = naive_variant(
        journal=journals["handler_quick"], edinbox_row=True, mark=False, handler_cursor=True, quick=True
    )
    try:
        title = "MariaDB, one message per transaction"
        paired(title, variants, turns=turns, chunk=chunk, base="naive inbox", server=server)
        print_wire(variants)
    finally:
        for inbox in inboxes.values():
            inbox.close()
        with admin.cursor() as cursor:
            for name in ("business", "naive", "cursor", "quick", "mark", "block", "blocks"):
                cursor.execute(f"DROP TABLE IF EXISTS {table}_{name}")
            for journal in journals.values():
                cursor.execute(f"DROP TABLE IF EXISTS {journal}, {journal}_version, {journal}_outbox")
        admin.close()


def per_batch(url: str, table: str, *, turns: int, batch: int, server: int | None) -> None:
    """A naive batch (one INSERT IGNORE ... RETURNING, the business executemany, COMMIT) vs Inbox.process_batch."""
    statements = Statements(parse_table(table, qualified=True))
    connection = connect(url, statements)
    inbox = Inbox(url, consumer=CONSUMER, table=f"{table}_process")
    inbox.create_schema()
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {table}_business (message_id VARCHAR(100) NOT NULL, body BLOB)")
        cursor.execute(
            f"CREATE TABLE {table}_naive (consumer VARBINARY(512) NOT NULL, source VARBINARY(512) NOT NULL, "
            "message_id VARBINARY(512) NOT NULL, received_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), "
            "UNIQUE KEY (consumer, source, message_id))"
        )
    business = f"INSERT INTO {table}_business (message_id, body) VALUES (%s, %s)"
    naive_insert = f"INSERT IGNORE INTO {table}_naive (consumer, source, message_id) VALUES "

    def rows(messages: list[Message]) -> list[tuple[str, bytes]]:
        return [(m.message_id, m.payload) for m in messages]

    def naive(messages: list[Message]) -> None:
        with connection.cursor() as cursor:
            for start in range(0, len(messages), batch):
                part = messages[start : start + batch]
                values = ", ".join(cursor.mogrify("(%s, %s, %s)", (CONSUMER, m.source, m.message_id)) for m in part)
                cursor.execute(naive_insert + values.replace("%", "%%") + " RETURNING message_id")
                new = {row[0].decode() for row in cursor.fetchall()}
                cursor.executemany(business, rows([m for m in part if m.message_id in new]))
                connection.commit()

    def handler(tx: Tx, messages: list[Message]) -> None:
        with tx.connection.cursor() as cursor:
            cursor.executemany(business, rows(messages))

    def process_batch(messages: list[Message]) -> None:
        for start in range(0, len(messages), batch):
            inbox.process_batch(messages[start : start + batch], handler)

    variants = {"naive batch": naive, "Inbox.process_batch": process_batch}
    try:
        title = f"MariaDB, batches of {batch} new messages"
        paired(title, variants, turns=turns, chunk=2, base="naive batch", size=batch, server=server)
        print_wire(variants, count=10, size=batch)
    finally:
        inbox.close()
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {table}_business, {table}_naive")
            cursor.execute(f"DROP TABLE IF EXISTS {table}_process, {table}_process_version, {table}_process_outbox")
        connection.close()


def joined(title: str, sa_url: str, table: str, *, turns: int, chunk: int) -> None:
    """Inbox(raw connection).process + COMMIT against process(session=) + session.commit(), on one engine."""
    engine = create_engine(sa_url)
    with engine.begin() as connection:
        connection.execute(text(f"CREATE TABLE {table}_business (message_id VARCHAR(100) NOT NULL)"))
    insert = text(f"INSERT INTO {table}_business (message_id) VALUES (:m)")
    with Inbox(engine, consumer=CONSUMER, table=table) as owner:
        owner.create_schema()
    raw = engine.raw_connection()  # the driver's connection, as an application holding it would pass it
    driver: Any = raw.driver_connection
    raw_inbox = Inbox(driver, consumer=CONSUMER, table=table)
    session_inbox = Inbox(engine, consumer=CONSUMER, table=table)
    statement = str(insert.compile(engine)).replace("%(m)s", "%s")

    def raw_handler(tx: Tx, m: Message) -> None:
        cursor = tx.connection.cursor()
        cursor.execute(statement, (m.message_id,))
        cursor.close()

    def raw_path(messages: list[Message]) -> None:
        for m in messages:
            raw_inbox.process(m, raw_handler)
            driver.commit()

    def session_handler(tx: Tx, m: Message) -> None:
        tx.connection.execute(insert, {"m": m.message_id})

    def session_path(messages: list[Message]) -> None:
        with Session(engine) as session:
            for m in messages:
                session_inbox.process(m, session_handler, session=session)
                session.commit()

    variants = {"raw connection": raw_path, "SQLAlchemy session": session_path}
    try:
        paired(title, variants, turns=turns, chunk=chunk, base="raw connection")
        if engine.dialect.name == "mysql":
            print_wire(variants)
    finally:
        raw_inbox.close()
        session_inbox.close()
        raw.close()
        with engine.begin() as connection:
            connection.execute(text(f"DROP TABLE IF EXISTS {table}_business"))
            connection.execute(text(f"DROP TABLE IF EXISTS {table}_version"))
            connection.execute(text(f"DROP TABLE IF EXISTS {table}_outbox"))
            connection.execute(text(f"DROP TABLE IF EXISTS {table}"))
        engine.dispose()


def load() -> str:
    """The load averages and the share of CPU time the machine spent busy over the last second."""

    def busy() -> tuple[int, int]:
        with open("/proc/stat") as stat:
            fields = [int(f) for f in stat.readline().split()[1:]]
        return sum(fields) - fields[3] - fields[4], sum(fields)

    used, total = busy()
    time.sleep(1)
    used2, total2 = busy()
    averages = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    return f"load average {averages}, CPU busy {100 * (used2 - used) / max(1, total2 - total):.0f} %"


def main(argv: list[str] | None = None) -> None:
    """Run the comparisons."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="mysql://root@127.0.0.1:3306/test")
    parser.add_argument("--private", action="store_true", help="start a MariaDB server of the bench's own")
    parser.add_argument("--flush", type=int, default=1, help="innodb_flush_log_at_trx_commit of --private")
    parser.add_argument("--turns", type=int, default=150)
    parser.add_argument("--chunk", type=int, default=20)
    parser.add_argument("--batch", type=int, default=50, help="messages per batch (0: no batch comparison)")
    parser.add_argument("--joined", action="store_true", help="also compare the joined paths (raw, SQLAlchemy)")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--only", choices=["joined"], help="run this comparison alone")
    args = parser.parse_args(argv)
    server = None
    url = args.url
    if args.private:
        from tests.servers import PrivateMariaDB

        # the shared server's durability and sizes, on a server no one else uses
        options = [f"--innodb-flush-log-at-trx-commit={args.flush}", "--innodb-buffer-pool-size=128M"]
        server = PrivateMariaDB(options=[*options, "--innodb-log-file-size=96M"])
        server.__enter__()
        url = server.url
    where = f"a private server (innodb_flush_log_at_trx_commit={args.flush})" if server else "the shared server"
    print(f"edinbox MariaDB benchmark on {where}, {os.cpu_count()} CPUs; before: {load()}")
    name: Callable[[], str] = lambda: "bench_" + uuid.uuid4().hex[:10]  # noqa: E731
    try:
        pid = server._pid() if server is not None else None
        if args.only != "joined":
            per_message(url, name(), turns=args.turns, chunk=args.chunk, server=pid)
        if args.batch and args.only != "joined":
            per_batch(url, name(), turns=max(1, args.turns // 3), batch=args.batch, server=pid)
        if args.joined or args.only == "joined":
            plain: Any = url.split("://", 1)[1]
            title = "MariaDB, joining the caller's transaction"
            joined(title, f"mysql+pymysql://{plain}", name(), turns=args.turns, chunk=args.chunk)
            plain = args.postgres.split("://", 1)[1]
            title = "PostgreSQL, joining the caller's transaction"
            joined(title, f"postgresql+psycopg://{plain}", name(), turns=args.turns, chunk=args.chunk)
    finally:
        if server is not None:
            server.__exit__(None, None, None)
    print(f"\nafter: {load()}")


if __name__ == "__main__":
    main()
