"""The variants bench/journal_scale.py measures, per layout and key shape, and the journals they run on: filled
once and kept, or empty and dropped at the end of a run."""

from __future__ import annotations

import argparse
import time
from typing import Any

import psycopg

from bench._journal_layouts import (
    CONSUMER,
    FILTERED,
    FILTERS,
    PARTNERS,
    SCHEMA,
    Checked,
    Keys,
    Redelivered,
    Variants,
    application,
    count,
    create_collated,
    create_digest,
    create_generations,
    create_ring,
    digest_batch,
    fill_digest,
    fill_flat,
    fill_hash,
    fill_hot,
    fill_ring,
    filtered_batch,
    flat_batch,
    former,
    full_name,
    generations_batch,
    hot_name,
    ring_batch,
    stored_filter,
)
from edinbox import Inbox


def fill_journals(args: argparse.Namespace, connection: psycopg.Connection[Any]) -> None:
    """Fill the full journals of `args.keys` and `args.layouts` that are not there yet (or all with `--refill`), and
    the filtered layout's kept hot tables."""
    for shape in args.keys.split(","):
        for layout in args.layouts.split(","):
            table = full_name(layout, shape, args.rows, partitions=args.partitions)
            if layout == "filtered" and args.hot:  # a kept hot table of older keys for the full journal
                hot = hot_name(shape, args.hot)
                if args.refill or count(connection, hot) < args.hot:
                    started = time.perf_counter()
                    below = args.rows // PARTNERS + 1 + 5 * 10**6
                    fill_hot(connection, hot, shape=shape, rows=args.hot, below=below)
                    print(f"filled {hot} with {args.hot:,} rows in {time.perf_counter() - started:.0f} s", flush=True)
            if layout in ("generations", "filtered"):  # their cold table is the flat journal
                continue
            if args.refill or count(connection, table) < args.rows:
                started = time.perf_counter()
                if layout == "flat":
                    fill_flat(args.url, connection, table, shape=shape, rows=args.rows)
                elif layout == "collate":
                    connection.execute(f"DROP TABLE IF EXISTS {SCHEMA}.{table}".encode())
                    create_collated(connection, table)
                    fill_flat(args.url, connection, table, shape=shape, rows=args.rows)
                elif layout == "hash":
                    fill_hash(args.url, connection, table, shape=shape, rows=args.rows, parts=args.partitions)
                elif layout == "digest":
                    fill_digest(connection, table, shape=shape, rows=args.rows)
                else:
                    fill_ring(connection, table, shape=shape, rows=args.rows)
                print(f"filled {table} with {args.rows:,} rows in {time.perf_counter() - started:.0f} s", flush=True)


def flat_variants(
    args: argparse.Namespace, layout: str, *, shape: str, empty: str, start: int, inboxes: list[Inbox]
) -> tuple[Variants, dict[str, str]]:
    """The variants of a flat, hash or collate layout (empty and full, and those `args` adds on the flat one), each on
    an Inbox added to `inboxes`; and the tables of its empty and full journals, for EXPLAIN."""
    variants: Variants = {}
    tables: dict[str, str] = {}
    full = full_name(layout, shape, args.rows, partitions=args.partitions)
    journals = [(f"{layout} empty", empty, args.url), (f"{layout} full", full, args.url)]
    if layout == "flat" and args.wal_compression:  # a superuser's session setting, through libpq's options
        compressed = f"{args.url}{'&' if '?' in args.url else '?'}options=-c%20wal_compression%3Dlz4"
        journals.append((f"{layout} lz4 full", full, compressed))
    if layout == "flat" and args.former:  # the same journals, ON CONFLICT for every batch
        journals += [("former empty", f"{empty}_former", args.url), ("former full", full, args.url)]
    if layout == "flat" and args.redelivered:  # on empty journals: a plain INSERT's worst case
        journals += [
            ("redelivered flat", f"{empty}_redelivered", args.url),
            ("redelivered former", f"{empty}_redelivered_former", args.url),
        ]
    if layout == "flat" and args.sorted:  # the same batches sorted by key before process_batch
        journals += [("sorted empty", f"{empty}_sorted", args.url), ("sorted full", full, args.url)]
    for n, (name, table, url) in enumerate(journals):
        named = f"{url}{'&' if '?' in url else '?'}application_name={application(name)}"
        inbox = Inbox(named, consumer=CONSUMER, table=f"{SCHEMA}.{table}")
        inbox.create_schema()
        inbox.verify()  # the partitioned journal passes the store's own checks
        inboxes.append(inbox)
        # two variants on one full journal: rising numbers of their own, each above the filled ones
        if "former" in name:
            former(inbox)
        redelivered = name.startswith("redelivered")
        batch = flat_batch(inbox, ordered=name.startswith("sorted"), known=int(redelivered))
        fresh = (Redelivered if redelivered else Keys)(shape, start=start + n * 10**6)
        variants[name] = (fresh, batch)
        if name in (f"{layout} empty", f"{layout} full"):
            tables[name] = table
    return variants, tables


def generations_variants(
    args: argparse.Namespace,
    connection: psycopg.Connection[Any],
    *,
    shape: str,
    empty: str,
    start: int,
    closing: list[psycopg.Connection[Any]],
) -> Variants:
    """The generations layout's variants, empty and full (whose cold table is the flat journal), each on a connection
    of its own added to `closing`."""
    layout = "generations"
    variants: Variants = {}
    create_generations(connection, f"{empty}_hot", f"{empty}_cold")
    create_generations(connection, f"{empty}_hotfull", None)
    cold = full_name("flat", shape, args.rows)
    pairs = (("empty", f"{empty}_hot", f"{empty}_cold"), ("full", f"{empty}_hotfull", cold))
    for name, hot, probed in pairs:
        variant = f"{layout} {name}"
        named = f"{args.url}{'&' if '?' in args.url else '?'}application_name={application(variant)}"
        direct = psycopg.connect(named, autocommit=True)
        closing.append(direct)
        fresh = Keys(shape, start=start + 5 * 10**6)
        variants[variant] = (fresh, generations_batch(direct, hot, probed))
    return variants


def filtered_variants(
    args: argparse.Namespace,
    connection: psycopg.Connection[Any],
    *,
    shape: str,
    empty: str,
    start: int,
    checked: dict[str, Checked],
    closing: list[psycopg.Connection[Any]],
) -> Variants:
    """The filtered layout's variants, empty and full (whose cold table is the flat journal, its hot table empty or
    kept), each on a connection of its own added to `closing`, its filter's checks in `checked`."""
    layout = "filtered"
    variants: Variants = {}
    create_generations(connection, f"{empty}_hot", f"{empty}_cold")
    cold = full_name("flat", shape, args.rows)
    hot = hot_name(shape, args.hot) if args.hot else f"{empty}_hotfull"
    if not args.hot:
        create_generations(connection, hot, None)
    pairs = (
        ("empty", f"{empty}_hot", f"{empty}_cold", f"{empty}_head", False),
        ("full", hot, cold, f"{empty}_headfull", args.refill),
    )
    for name, hot, probed, head, rebuild in pairs:
        for statement in ("create_head", "seed_head"):
            connection.execute(FILTERED[statement].format(head=f"{SCHEMA}.{head}").encode())
        bloom = stored_filter(connection, probed, rate=args.rate, rebuild=rebuild or name == "empty")
        variant = f"{layout} {name}"
        named = f"{args.url}{'&' if '?' in args.url else '?'}application_name={application(variant)}"
        direct = psycopg.connect(named, autocommit=True)
        closing.append(direct)
        checked[variant] = Checked()
        batch = filtered_batch(direct, hot, probed, head, bloom=bloom, checked=checked[variant])
        variants[variant] = (Keys(shape, start=start + 5 * 10**6), batch)
    return variants


def digest_or_ring_variants(  # noqa: PLR0917 - the loop's names, in its order
    args: argparse.Namespace,
    connection: psycopg.Connection[Any],
    work: psycopg.Connection[Any],
    layout: str,
    shape: str,
    empty: str,
    start: int,
) -> Variants:
    """The digest or ring layout's variants, empty and full, on the connection `work`."""
    variants: Variants = {}
    if layout == "digest":
        create_digest(connection, empty)
        variants[f"{layout} empty"] = (Keys(shape, start=start), digest_batch(work, empty))
        full = full_name(layout, shape, args.rows)
        variants[f"{layout} full"] = (Keys(shape, start=start), digest_batch(work, full))
    else:
        create_ring(connection, empty)
        variants[f"{layout} empty"] = (Keys(shape, start=start), ring_batch(work, empty))
        variants[f"{layout} full"] = (
            Keys(shape, start=start),
            ring_batch(work, full_name(layout, shape, args.rows)),
        )
    return variants


def drop_empty(connection: psycopg.Connection[Any], shapes: list[str], layouts: list[str], suffix: str) -> None:
    """Drop the empty journals (and their side tables) of this run, named with `suffix`, and their filters."""
    for shape in shapes:
        for layout in layouts:
            empty = f"{SCHEMA}.empty_{layout}_{shape}_{suffix}"
            connection.execute(f"DROP TABLE IF EXISTS {empty}, {empty}_head, {empty}_version".encode())
            connection.execute(f"DROP TABLE IF EXISTS {empty}_sorted, {empty}_sorted_version".encode())
            for kept in ("former", "redelivered", "redelivered_former"):
                connection.execute(f"DROP TABLE IF EXISTS {empty}_{kept}, {empty}_{kept}_version".encode())
            connection.execute(f"DROP TABLE IF EXISTS {empty}_hot, {empty}_cold, {empty}_hotfull".encode())
            connection.execute(f"DROP TABLE IF EXISTS {empty}_headfull".encode())
            if layout == "filtered" and count(connection, "filters"):  # the empty cold table's filter
                cold = f"empty_{layout}_{shape}_{suffix}_cold"
                connection.execute(f"DELETE FROM {FILTERS} WHERE generation = %s".encode(), [cold])
