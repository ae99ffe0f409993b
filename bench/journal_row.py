"""What one journal row costs the PostgreSQL server, against a 3-column inbox table, measured inside the server.

    .venv/bin/python -m bench.journal_row [--url postgresql://...] [--rounds 40] [--rows 1000]

The client's share (Python, the round trips) is left out: a procedure inserts `--rows` rows one statement at a
time into each table in turn (the order rotated every round, each round its own transaction) and times them with
clock_timestamp(); the statement is the store's `insert_processed` (all its columns, ON CONFLICT DO NOTHING) or,
for the 3-column table, an Eventuate-style INSERT ... ON CONFLICT DO NOTHING. Tables, in a schema of their own
(dropped at the end):

- `eventuate`: (consumer, message_id, received_at bigint), its primary key on the first two;
- `journal`: the journal as `Inbox.create_schema()` makes it (the status checked by its domain);
- `journal_check`: the same with the status checked by a CHECK on the table (the layout before version 12);
- `journal_unchecked`: the same with no rule on the status at all (what the rule costs);
- with `--console`, `journal_console`: the journal with the indexes `edinbox init` adds to a hub's journal for the
  console's search (received, status, control number), `journal_console_trigram`: the same with the partner's
  trigram index on the source (a hub's journal before the hub's version 8 dropped it), `journal_console_partial`:
  the three with the status index partial, `WHERE status <> 'processed'`, and `console_<index>`: the journal with
  that one of them (`console_partner`: the trigram index).

Printed per table: the median and 10th percentile of the rounds' microseconds per row, the ratio of the medians to
`eventuate`, the WAL per row (the commit records aside) and the bytes per row of the heap and of all its indexes at
the end.
"""

from __future__ import annotations

import argparse
import os
import uuid

import psycopg

from edinbox import Inbox

STATUSES = "('processed', 'in_progress', 'failed', 'dead', 'conflict', 'requeued')"
JOURNAL_INSERT = (
    "INSERT INTO {table} AS t (consumer, source, message_id, fingerprint, status, attempts, received_at, settled_at, "
    "trace) VALUES ('bench', 'bench:source', 'one-1a2b3c4d-' || i, "
    "'0f343b0931126a20f133d67c2b018a3b5f3d8c1b5c0a2a1d7e8f9a0b1c2d3e4f', 'processed', 1, now(), now(), NULL) "
    "ON CONFLICT DO NOTHING"
)
EVENTUATE_INSERT = (
    "INSERT INTO {table} (consumer, message_id, received_at) VALUES ('bench', 'one-1a2b3c4d-' || i, 1765000000000) "
    "ON CONFLICT DO NOTHING"
)
TABLES = ("eventuate", "journal", "journal_check", "journal_unchecked")
CONSOLE = {
    "received": "(consumer, received_at DESC)",
    "status": "(consumer, status, received_at DESC)",
    "control": "(consumer, message_id)",
}
"""The indexes `edinbox init` adds to a hub's journal for the console's search (`hub/sql/postgresql/console.sql`)."""
TRIGRAM = {"partner": "USING gin (source gin_trgm_ops)"}
"""The partner search's trigram index on the source, which the hub's version 8 dropped."""
CONSOLE_TABLES = (
    "journal_console",
    "journal_console_trigram",
    "journal_console_partial",
    *(f"console_{index}" for index in (*CONSOLE, *TRIGRAM)),
)


def indexes(name: str) -> dict[str, str]:
    """The console's indexes on table `name`: all of them, those of a hub before version 8 (with the trigram
    index), or one."""
    if name in ("journal_console", "journal_console_partial"):
        return CONSOLE
    if name == "journal_console_trigram":
        return CONSOLE | TRIGRAM
    index = name.removeprefix("console_")
    return {index: (CONSOLE | TRIGRAM)[index]}


def create(connection: psycopg.Connection[object], url: str, schema: str, *, console: bool) -> None:
    """The tables in `schema`."""
    connection.execute(f"CREATE SCHEMA {schema}".encode())
    connection.execute(
        f"CREATE TABLE {schema}.eventuate (consumer text NOT NULL, message_id text NOT NULL, "
        "received_at bigint NOT NULL, PRIMARY KEY (consumer, message_id))".encode()
    )
    with Inbox(url, consumer="bench", table=f"{schema}.journal") as inbox:
        inbox.create_schema()
    for name, rule in (("journal_check", f"CHECK (status IN {STATUSES})"), ("journal_unchecked", None)):
        connection.execute(f"CREATE TABLE {schema}.{name} (LIKE {schema}.journal INCLUDING DEFAULTS)".encode())
        connection.execute(f"ALTER TABLE {schema}.{name} ALTER COLUMN status TYPE text".encode())
        if rule:
            connection.execute(f"ALTER TABLE {schema}.{name} ADD CONSTRAINT {name}_status_check {rule}".encode())
        connection.execute(f"CREATE UNIQUE INDEX {name}_key ON {schema}.{name} (consumer, source, message_id)".encode())
    if console:
        connection.execute(b"CREATE EXTENSION IF NOT EXISTS pg_trgm")
        for name in CONSOLE_TABLES:
            connection.execute(f"CREATE TABLE {schema}.{name} (LIKE {schema}.journal INCLUDING DEFAULTS)".encode())
            connection.execute(
                f"CREATE UNIQUE INDEX {name}_key ON {schema}.{name} (consumer, source, message_id)".encode()
            )
            for index, columns in indexes(name).items():
                partial = " WHERE status <> 'processed'" if index == "status" and name.endswith("partial") else ""
                connection.execute(f"CREATE INDEX {name}_{index} ON {schema}.{name} {columns}{partial}".encode())
    connection.execute(f"CREATE TABLE {schema}.times (variant text, round int, us float8, wal bigint)".encode())


def procedure(schema: str, tables: tuple[str, ...]) -> str:
    """The timing procedure: per round, each table's rows one INSERT at a time, the order rotated."""
    branches = []
    for name in tables:
        insert = (EVENTUATE_INSERT if name == "eventuate" else JOURNAL_INSERT).format(table=f"{schema}.{name}")
        branches.append(f"IF v = '{name}' THEN FOR i IN base .. base + n - 1 LOOP {insert}; END LOOP; END IF;")
    body = "\n".join(branches)
    return f"""
CREATE PROCEDURE {schema}.run(rounds int, n int) LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; w0 pg_lsn; base int; v text; names text[] := ARRAY{list(tables)!r}::text[];
BEGIN
FOR r IN 1 .. rounds LOOP
    base := r * n;
    FOR k IN 0 .. array_length(names, 1) - 1 LOOP
        v := names[1 + (k + r) % array_length(names, 1)];
        w0 := pg_current_wal_insert_lsn();
        t0 := clock_timestamp();
        {body}
        INSERT INTO {schema}.times VALUES (v, r, extract(epoch FROM clock_timestamp() - t0) * 1e6 / n,
            pg_current_wal_insert_lsn() - w0);
    END LOOP;
    COMMIT;
END LOOP;
END $$"""


def main() -> None:
    """Create the tables, run the procedure (its first round a warm-up, left out), print the table, drop the schema."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--console", action="store_true", help="also the journal with the console's indexes")
    args = parser.parse_args()
    tables = TABLES + (CONSOLE_TABLES if args.console else ())
    schema = "bench_row_" + uuid.uuid4().hex[:8]
    with psycopg.connect(args.url, autocommit=True) as connection:
        try:
            create(connection, args.url, schema, console=args.console)
            connection.execute(procedure(schema, tables).encode())
            load = os.getloadavg()[0]
            connection.execute(f"CALL {schema}.run({args.rounds + 1:d}, {args.rows:d})".encode())
            rows = connection.execute(
                f"SELECT variant, percentile_cont(0.5) WITHIN GROUP (ORDER BY us), "
                f"percentile_cont(0.1) WITHIN GROUP (ORDER BY us), sum(wal)::float8 / sum(%s::int) "
                f"FROM {schema}.times WHERE round > 1 GROUP BY variant".encode(),
                (args.rows,),
            ).fetchall()
            figures = {name: (median, p10, wal) for name, median, p10, wal in rows}
            total = (args.rounds + 1) * args.rows  # the warm-up round included: its rows are in the tables
            print(
                f"\n{args.rounds} rounds of {args.rows} single-row INSERTs per table, load {load:.1f} -> "
                f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
            )
            print(
                "| table | us per row, median (p10) | x eventuate | WAL bytes per row | heap bytes per row | "
                "indexes' bytes per row |"
            )
            print("|---|---|---|---|---|---|")
            for name in tables:
                median, p10, wal = figures[name]
                heap, index = connection.execute(
                    b"SELECT pg_relation_size(%s::regclass), pg_indexes_size(%s::regclass)",
                    (f"{schema}.{name}", f"{schema}.{name}"),
                ).fetchall()[0]
                print(
                    f"| {name} | {median:.1f} ({p10:.1f}) | x{median / figures['eventuate'][0]:.2f} | {wal:,.0f} "
                    f"| {heap / total:,.0f} | {index / total:,.0f} |"
                )
        finally:
            connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE".encode())


if __name__ == "__main__":
    main()
