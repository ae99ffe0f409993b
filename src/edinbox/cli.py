"""The `edinbox` command: the EDI hub and the operator's commands.

Every setting is a flag, an `EDINBOX_` environment variable (shown in `--help`) or a key of the TOML file given
with `--config`; flags win over the environment, which wins over the file. Only this module reads the environment.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import click

from edinbox._errors import InboxError
from edinbox._urls import mask
from edinbox.hub import _ops
from edinbox.hub._config import HubConfig, load_config

__all__ = ["main"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


@click.group(context_settings={"auto_envvar_prefix": "EDINBOX", "help_option_names": ["-h", "--help"]})
def main() -> None:
    """edinbox: each partner interchange creates its invoice once, however often the broker redelivers.

    Settings come from flags, EDINBOX_ environment variables (see each command's --help) or a TOML file (--config).
    """


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine; edinbox errors become a one-line message (passwords masked) and exit status 1."""
    try:
        return asyncio.run(coro)
    except InboxError as exc:
        raise click.ClickException(mask(str(exc))) from exc


def _option(name: str, envvar: str, **kwargs: Any) -> Callable[[F], F]:
    return click.option(name, envvar=envvar, show_envvar=True, default=None, **kwargs)


def db_options(func: F) -> F:
    """The options every command shares: --config, --db, --table, --consumer (and their EDINBOX_ variables)."""
    for decorator in reversed(
        [
            _option("--config", "EDINBOX_CONFIG", type=click.Path(dir_okay=False, path_type=Path), help="hub.toml"),
            _option("--db", "EDINBOX_DB", help="postgresql://... or sqlite:///hub.db  [default: sqlite:///edinbox.db]"),
            _option("--table", "EDINBOX_TABLE", help="journal table, e.g. edi.inbox  [default: inbox]"),
            _option("--consumer", "EDINBOX_CONSUMER", help="consumer name in the journal  [default: accounting]"),
        ]
    ):
        func = decorator(func)
    return func


def _config(config: Path | None, **overrides: Any) -> HubConfig:
    try:
        return load_config(config).with_overrides(**overrides)
    except InboxError as exc:
        raise click.UsageError(str(exc)) from exc


def _routed(cfg: HubConfig, routes: tuple[str, ...]) -> HubConfig:
    """Apply `--route TYPE=ROUTE` options over the configured routes."""
    if not routes:
        return cfg
    table = dict(cfg.routes)
    for entry in routes:
        kind, sep, route = entry.partition("=")
        if not sep or not kind:
            raise click.BadParameter(f"{entry!r}: expected TYPE=inbox or TYPE=bypass", param_hint="--route")
        table[kind.strip().upper()] = route.strip()
    try:
        return cfg.with_overrides(routes=table)
    except InboxError as exc:
        raise click.BadParameter(str(exc), param_hint="--route") from exc


def _print(data: Any, *, as_json: bool, columns: list[str] | None = None) -> None:
    if as_json:
        click.echo(json.dumps(data, default=str))
        return
    if isinstance(data, dict):
        width = max((len(k) for k in data), default=0)
        for key, value in data.items():
            text = json.dumps(value, default=str) if isinstance(value, dict | list) else value
            click.echo(f"{key.ljust(width)}  {text}")
        return
    columns = columns or (list(data[0]) if data else [])
    table = [[str(row.get(c, "")) for c in columns] for row in data]
    widths = [max([len(c)] + [len(r[i]) for r in table]) for i, c in enumerate(columns)]
    click.echo("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for r in table:
        click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


@main.command()
@db_options
@_option("--source", "EDINBOX_SOURCE", help="dir:///srv/edi, amqp://..., nats://..., redis://..., kafka://...")
@_option("--batch-size", "EDINBOX_BATCH_SIZE", type=int, help="deliveries settled per transaction  [default: 20]")
@_option("--poll-timeout", "EDINBOX_POLL_TIMEOUT", type=float, help="seconds a receive waits  [default: 0.5]")
@_option("--idle-timeout", "EDINBOX_IDLE_TIMEOUT", type=float, help="with --once: idle seconds before exit [1.5]")
@_option("--max-attempts", "EDINBOX_MAX_ATTEMPTS", type=int, help="handler failures before a message is dead [5]")
@_option("--horizon", "EDINBOX_HORIZON", help="the longest time a message can come back  [default: 7d]")
@_option("--lease", "EDINBOX_LEASE", help="claim length for a non-transactional accounting sink  [default: 5m]")
@_option(
    "--non-edi",
    "EDINBOX_NON_EDI",
    type=click.Choice(["reject", "inbox"]),
    help="payloads that are not EDI: park them, or key them by producer id  [default: reject]",
)
@click.option(
    "--route",
    "routes",
    multiple=True,
    envvar="EDINBOX_ROUTES",
    show_envvar=True,
    metavar="TYPE=inbox|bypass",
    help="route a message type (repeatable), e.g. --route DESADV=bypass",
)
@click.option("--once", is_flag=True, envvar="EDINBOX_ONCE", show_envvar=True, help="drain what is waiting, exit")
@click.option(
    "--log-format", type=click.Choice(["text", "json"]), default="text", envvar="EDINBOX_LOG_FORMAT", show_envvar=True
)
@click.option("--quiet", "-q", is_flag=True, help="log warnings and errors only")
@_option(
    "--accounting",
    "EDINBOX_ACCOUNTING",
    help="POST invoices to this HTTP API (lease mode, Idempotency-Key) instead of the invoices table",
)
def run(
    *,
    config: Path | None,
    db: str | None,
    table: str | None,
    consumer: str | None,
    source: str | None,
    batch_size: int | None,
    poll_timeout: float | None,
    idle_timeout: float | None,
    max_attempts: int | None,
    horizon: str | None,
    lease: str | None,
    non_edi: str | None,
    routes: tuple[str, ...],
    once: bool,
    log_format: str,
    quiet: bool,
    accounting: str | None,
) -> None:
    """Run the hub: settle deliveries from --source through the inbox into accounting, ack after commit.

    SIGTERM or Ctrl-C stops it gracefully (the batch in hand is finished and acked). EDINBOX_FAULT=after_commit:N
    arms the fault point: the process kills itself after the N-th commit, before the ack (for redelivery tests).
    """
    from edinbox.hub._fault import parse_fault

    cfg = _config(
        config,
        db=db,
        table=table,
        consumer=consumer,
        source=source,
        batch_size=batch_size,
        poll_timeout=poll_timeout,
        idle_timeout=idle_timeout,
        max_attempts=max_attempts,
        horizon=horizon,
        lease=lease,
        non_edi=non_edi,
    )
    cfg = _routed(cfg, routes)
    try:
        fault = parse_fault(os.environ.get("EDINBOX_FAULT"))
    except InboxError as exc:
        raise click.UsageError(str(exc)) from exc
    logging.basicConfig(
        level=logging.WARNING if quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    totals = _run(_serve(cfg, fault=fault, once=once, log_json=log_format == "json", accounting=accounting))
    summary = " ".join(f"{k}={v}" for k, v in sorted(totals.items()))
    logging.getLogger("edinbox.hub").info(mask(f"stopped {summary}".strip()))


async def _serve(
    cfg: HubConfig, *, fault: Any, once: bool, log_json: bool, accounting: str | None = None
) -> dict[str, int]:
    from edinbox.hub._hub import open_hub

    sink: Any = None
    if accounting:
        from edinbox.hub.http_sink import HttpAccounting

        http = HttpAccounting(accounting)
        sink = lambda _db: http  # noqa: E731 - open_hub takes a factory of the hub's database
    async with open_hub(cfg, fault=fault, log_json=log_json, accounting=sink) as hub:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, hub.stop.set)
        logging.getLogger("edinbox.hub").info(
            mask(f"started consumer={cfg.consumer} db={cfg.db} source={cfg.source} batch_size={cfg.batch_size}")
        )
        return dict(await hub.run(once=once))


@main.command()
@db_options
def init(*, config: Path | None, db: str | None, table: str | None, consumer: str | None) -> None:
    """Create the journal and the hub's tables (idempotent)."""
    cfg = _config(config, db=db, table=table, consumer=consumer)
    _run(_ops.init(cfg))
    click.echo(f"ready: journal {cfg.table} and the hub's tables in {mask(cfg.db)}")


@main.command()
@db_options
@_option("--source", "EDINBOX_SOURCE", help="also check that this source can be reached")
@_option("--retention", "EDINBOX_RETENTION", help="how long journal rows are kept (purge age)  [default: 30d]")
@_option("--horizon", "EDINBOX_HORIZON", help="the longest time a message can come back  [default: 7d]")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def doctor(
    *,
    config: Path | None,
    db: str | None,
    table: str | None,
    consumer: str | None,
    source: str | None,
    retention: str | None,
    horizon: str | None,
    as_json: bool,
) -> None:
    """Check connectivity, the journal schema and unique key, the invoice key, and retention vs the horizon."""
    cfg = _config(config, db=db, table=table, consumer=consumer, source=source, retention=retention, horizon=horizon)
    checks = _run(_ops.doctor(cfg))
    rows = [{"check": c.name, "status": c.status, "detail": c.detail} for c in checks]
    _print(rows, as_json=as_json, columns=["check", "status", "detail"])
    if any(c.status == "fail" for c in checks):
        sys.exit(1)


@main.command()
@db_options
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
def stats(*, config: Path | None, db: str | None, table: str | None, consumer: str | None, as_json: bool) -> None:
    """Counts by outcome, rows by journal status, the oldest row's age and the table size."""
    cfg = _config(config, db=db, table=table, consumer=consumer)
    _print(_run(_ops.stats(cfg)), as_json=as_json)


@main.command("list")
@db_options
@click.option(
    "--status",
    type=click.Choice(["processed", "failed", "dead", "conflict", "in_progress", "rejected"]),
    help="only rows of this status (rejected: parked payloads that did not parse)",
)
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=1))
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def list_(
    *,
    config: Path | None,
    db: str | None,
    table: str | None,
    consumer: str | None,
    status: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """List journal rows (newest first) or parked payloads (--status rejected)."""
    cfg = _config(config, db=db, table=table, consumer=consumer)
    rows = _run(_ops.list_rows(cfg, status=status, limit=limit))
    columns = ["key", "status", "deliveries", "at", "reason"] if status == "rejected" else None
    _print(rows, as_json=as_json, columns=columns or ["key", "status", "attempts", "at", "error"])


@main.command()
@db_options
@click.argument("key")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def show(
    *, config: Path | None, db: str | None, table: str | None, consumer: str | None, key: str, as_json: bool
) -> None:
    """Show one journal row (KEY = SOURCE/MESSAGE_ID, as `list` prints it) or a parked payload (rejected/ID)."""
    cfg = _config(config, db=db, table=table, consumer=consumer)
    data = _run(_ops.show(cfg, key))
    if data is None:
        raise click.ClickException(f"no row {key!r} for consumer {cfg.consumer!r}")
    _print(data, as_json=as_json)


@main.command()
@db_options
@click.argument("key")
def requeue(*, config: Path | None, db: str | None, table: str | None, consumer: str | None, key: str) -> None:
    """Make a dead or conflicting message processable again (its next delivery runs the handler)."""
    cfg = _config(config, db=db, table=table, consumer=consumer)
    if not _run(_ops.requeue(cfg, key)):
        raise click.ClickException(f"no dead or conflicting row {key!r}")
    click.echo(f"requeued {key}")


@main.command()
@db_options
@click.argument("key")
@click.confirmation_option(prompt="Forget this key? Its next delivery will be processed again.")
def forget(*, config: Path | None, db: str | None, table: str | None, consumer: str | None, key: str) -> None:
    """Delete a journal row on purpose, so that the next delivery of the key is processed again."""
    cfg = _config(config, db=db, table=table, consumer=consumer)
    if not _run(_ops.forget(cfg, key)):
        raise click.ClickException(f"no row {key!r}")
    click.echo(f"forgot {key}")


@main.command()
@db_options
@_option("--older-than", "EDINBOX_RETENTION", help="age of the rows to delete (30d, 12h, ...)  [default: 30d]")
@_option("--horizon", "EDINBOX_HORIZON", help="the longest time a message can come back  [default: 7d]")
@click.option("--batch-size", default=1000, show_default=True, type=click.IntRange(min=1))
def purge(
    *,
    config: Path | None,
    db: str | None,
    table: str | None,
    consumer: str | None,
    older_than: str | None,
    horizon: str | None,
    batch_size: int,
) -> None:
    """Delete settled journal rows older than --older-than in bounded batches (never younger than the horizon)."""
    cfg = _config(config, db=db, table=table, consumer=consumer, retention=older_than, horizon=horizon)
    with click.progressbar(length=1, label=f"purging rows older than {cfg.retention}", file=sys.stderr) as bar:
        shown = 0

        def progress(deleted: int, total: int) -> None:
            nonlocal shown
            bar.length = total
            bar.update(deleted - shown)
            shown = deleted

        total = _run(_ops.purge(cfg, older_than=cfg.retention, batch_size=batch_size, progress=progress))
    click.echo(f"purged {total} rows older than {cfg.retention}")


@main.command()
@click.option("--messages", default=500, show_default=True, type=click.IntRange(min=1), help="interchanges")
@click.option(
    "--duplicate-rate",
    default=0.2,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="share of invoices a producer publishes twice",
)
@click.option(
    "--crash-rate",
    default=0.15,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="chance that a hub process is killed after a commit, before its ack",
)
@click.option("--seed", default=7, show_default=True, type=int, help="same seed, same traffic")
@click.option("--db", envvar="EDINBOX_DB", show_envvar=True, default=None, help="[default: SQLite in the work dir]")
@click.option("--table", default=None, help="journal table  [default: inbox; a fresh schema on PostgreSQL]")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 8), help="hub processes")
@click.option("--dir", "workdir", type=click.Path(file_okay=False, path_type=Path), help="spool + logs [temp dir]")
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
def demo(
    *,
    messages: int,
    duplicate_rate: float,
    crash_rate: float,
    seed: int,
    db: str | None,
    table: str | None,
    workers: int,
    workdir: Path | None,
    as_json: bool,
) -> None:
    """Run the hub on generated partner interchanges with duplicates and real crashes; check the invoices."""
    from edinbox.hub._demo import run_demo

    try:
        report = run_demo(
            messages=messages,
            duplicate_rate=duplicate_rate,
            crash_rate=crash_rate,
            seed=seed,
            db=db,
            table=table,
            workers=workers,
            workdir=workdir,
            echo=(lambda text: None) if as_json else click.echo,
        )
    except InboxError as exc:
        raise click.ClickException(mask(str(exc))) from exc
    if as_json:
        click.echo(json.dumps(report.as_dict()))
    else:
        click.echo(report.render())
    sys.exit(0 if report.ok else 1)


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--to", "url", required=True, envvar="EDINBOX_PUBLISH_TO", show_envvar=True, help="broker or spool URL")
@click.option("--raw", is_flag=True, help="send each file whole, keyed by its file name, without parsing it")
def publish(*, files: tuple[str, ...], url: str, raw: bool) -> None:
    """Send the interchanges in FILES to a broker, the producer id set to each interchange's key."""
    import asyncio
    from pathlib import Path

    from edinbox._errors import InboxError
    from edinbox._publish import split_files
    from edinbox._urls import mask
    from edinbox.sources import publisher

    async def send(messages: list[tuple[str, bytes]]) -> None:
        await publisher(url)(url, messages)

    try:
        messages = split_files([Path(f) for f in files], raw=raw)
        asyncio.run(send(messages))
    except InboxError as exc:
        raise click.ClickException(mask(str(exc))) from None
    for message_id, payload in messages:
        click.echo(f"{message_id}\t{len(payload)} bytes")
    click.echo(f"published {len(messages)} message(s) from {len(files)} file(s) to {mask(url)}")


if __name__ == "__main__":
    main()
