"""`edinbox demo` and `edinbox chaos`: generated traffic through real hub processes and real crashes, ending
in a checked verdict (exit 0 only when it holds).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click

from edinbox.cli._commands import Number, command
from edinbox.cli._commands import errors as _errors
from edinbox.cli._commands import json_option as _json
from edinbox.cli._commands import option as _option
from edinbox.cli._commands import say as _say

__all__ = ["chaos", "demo"]

MAX_MESSAGES = 1_000_000
"""The most interchanges `demo` and `chaos` generate."""
MAX_SECONDS = 86400.0
"""The longest time in seconds a `chaos` option may give (a day)."""
SEED = click.IntRange(0, 2**63 - 1)
"""A seed of the generated traffic."""


def _workdir(envvar: str, *, about: str) -> Callable[[Any], Any]:
    """The `--dir` option of a command that runs hubs in a folder (new or empty) of its own: what it keeps there."""
    return _option(
        "--dir",
        "workdir",
        envvar=envvar,
        type=click.Path(file_okay=False, path_type=Path),
        show_default="a temporary folder",
        help=about,
    )


def _verdict(report: Any, *, as_json: bool) -> NoReturn:
    """Print a run's report (one JSON object with --json) and exit by its verdict: 0 when it holds, else 1."""
    _say(json.dumps(report.as_dict()) if as_json else report.render())
    sys.exit(0 if report.ok else 1)


@command()
@_option("--messages", default=500, type=click.IntRange(1, MAX_MESSAGES), help="interchanges")
@_option("--duplicate-rate", default=0.2, type=Number(0, 1), help="share of invoices published twice")
@_option(
    "--crash-rate",
    default=0.15,
    type=Number(0, 1),
    help="chance that a hub process is killed after a commit, before its ack",
)
@_option("--seed", default=7, type=SEED, help="same seed, same traffic")
@_option("--db", envvar="EDINBOX_DB", default=None, show_default="SQLite in the work dir")
@_option("--table", default=None, show_default="inbox; a fresh schema on PostgreSQL", help="journal table")
@_option(
    "--workers",
    default=1,
    type=click.IntRange(1, 8),
    help="hub processes at once (more than 1: they race for files, so redelivery counts vary run to run)",
)
@_option("--keep", is_flag=True, help="keep the PostgreSQL schema the demo creates")
@_workdir("EDINBOX_DEMO_DIR", about="spool + logs (new or empty)")
@_json
def demo(*, as_json: bool, **options: Any) -> None:
    """Run the hub on generated partner interchanges with duplicates and real crashes; check the invoices."""
    from edinbox.hub.demo import run_demo

    with _errors():
        report = run_demo(**options, echo=(lambda text: None) if as_json else _say)
    _verdict(report, as_json=as_json)


@command()
@_option("--source", envvar="EDINBOX_SOURCE", required=True, help="the source to prove: dir://, amqp://, nats://...")
@_option("--db", envvar="EDINBOX_DB", required=True, help="the database to prove: postgresql://... or sqlite:///...")
@_option("--table", default=None, show_default="a fresh schema per run on PostgreSQL", help="journal table")
@_option("--messages", default=200, type=click.IntRange(1, MAX_MESSAGES), help="distinct invoice interchanges")
@_option("--duplicates", default=50, type=click.IntRange(0, MAX_MESSAGES), help="copies of published ones, sent again")
@_option("--hubs", default=3, type=click.IntRange(1, 16), help="hub processes at a time")
@_option("--kill-every", default=2.0, type=Number(0, MAX_SECONDS), help="seconds between kills; 0: none")
@_option("--restart-db-command", default=None, help="shell command run once, when a third of the invoices exist")
@_option("--timeout", default=300.0, type=Number(1, MAX_SECONDS), help="seconds in all")
@_option(
    "--drain-idle",
    type=Number(0, MAX_SECONDS),
    show_default="the source's ack_wait + 2, at least 6",
    help="idle seconds that count as drained",
)
@_option("--seed", default=7, type=SEED, help="same seed, same traffic and kills")
@_option("--batch-size", default=10, type=click.IntRange(1, 10000), help="deliveries per batch of each hub")
@_option(
    "--poison", default=0, type=click.IntRange(0, MAX_MESSAGES), help="bad deliveries among the good: each parked once"
)
@_option("--huge", default=0, type=click.IntRange(0, 1000), help="non-EDI deliveries of 17-20 MiB: each parked once")
@_workdir("EDINBOX_CHAOS_DIR", about="hub and restart logs")
@_json
def chaos(*, as_json: bool, **options: Any) -> None:
    """Prove a setup: publish traffic, run hubs, kill them, restart the database, count what was lost or doubled.

    Publishes --messages distinct invoice interchanges and --duplicates copies (same key, same bytes), runs --hubs
    `edinbox run` processes, SIGKILLs one every --kill-every seconds (some also kill themselves between a commit and
    its ack), runs --restart-db-command once, waits until every invoice exists and the hubs stay idle --drain-idle
    seconds, stops them and prints `lost=N doubled=M`. lost: expected invoices missing from the invoices table.
    doubled: effects committed twice; the invoices table's unique key would hide those, so they are counted from
    the hub's outcome counters (added in the same transaction as the invoices, with no unique key) minus the
    interchanges the journal settled. Runs `edinbox init` itself, on a fresh schema per run (PostgreSQL).

    --poison N mixes N deliveries that cannot be invoices (not EDI, cut short, a total the invoices table cannot
    hold) into the traffic, --huge N non-EDI blobs of 17 to 20 MiB (under the hub's max_payload); the verdict adds
    `parked=K of N`: each must be parked in the rejected table exactly once (parked_twice counts a second row) and
    none become an invoice (stray). A huge delivery the broker refuses (NATS: max_payload, 1 MiB by default) is
    said so and not counted. --batch-size is each hub's `edinbox run --batch-size`.
    The default --drain-idle outlasts the time a killed hub's deliveries take to come back (NATS ack_wait, Redis
    dead_after, the spool's 5 s).

    Exit status: 0 only when lost=0 and doubled=0 (and every bad delivery parked once, none an invoice) within
    --timeout; 1 otherwise (or a configuration error).
    """
    from edinbox.hub.chaos import run_chaos

    with _errors():
        report = run_chaos(**options, echo=(lambda text: None) if as_json else lambda text: _say(text, err=True))
    _verdict(report, as_json=as_json)
