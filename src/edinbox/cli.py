"""The `edinbox` command: the EDI hub and the operator's commands.

Every setting is a flag, an `EDINBOX_` environment variable (shown in `--help`) or a key of the TOML file given
with `--config`; flags win over the environment, which wins over the file. Only this module reads the environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from edinbox._errors import InboxError, TransientError
from edinbox._urls import mask
from edinbox.hub import _ops
from edinbox.hub._config import HubConfig, load_config
from edinbox.hub._output import render

__all__ = ["main"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


EXIT_CONFIGURATION = 1
"""A setting, flag, URL or the schema is wrong (click's usage errors included): fix it, then start again."""
EXIT_GAVE_UP = 2
"""`run --give-up-after`: a dependency stayed down longer than that."""


class _UsageError(click.UsageError):
    """A bad flag or value: a configuration error like any other (exit 1; 2 means a hub gave up)."""

    exit_code = EXIT_CONFIGURATION


class _Commands(click.Group):
    """The command group: a command's usage errors exit 1, as configuration errors."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; its usage errors keep their message and usage line, with exit status 1."""
        try:
            return super().invoke(ctx)
        except _UsageError:
            raise
        except click.UsageError as exc:
            raise _UsageError(exc.message, exc.ctx) from exc


@click.group(cls=_Commands, context_settings={"auto_envvar_prefix": "EDINBOX", "help_option_names": ["-h", "--help"]})
def main() -> None:
    """edinbox: each partner interchange creates its invoice once, however often the broker redelivers.

    Settings come from flags, EDINBOX_ environment variables (see each command's --help) or a TOML file (--config).
    Exit status: 0 done, 1 configuration (a flag, setting, URL or the schema: see the message), 2 `run` gave up
    after --give-up-after.
    """


@contextlib.contextmanager
def _errors() -> Iterator[None]:
    """edinbox errors become a one-line message (passwords masked) and exit status 1."""
    try:
        yield
    except InboxError as exc:
        raise click.ClickException(mask(str(exc))) from exc


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine, its edinbox errors reported as by `_errors`."""
    with _errors():
        return asyncio.run(coro)


def _option(*decls: str, **kwargs: Any) -> Callable[[F], F]:
    """An option whose environment variable `--help` shows (EDINBOX_<COMMAND>_<OPTION> unless named)."""
    return click.option(*decls, show_envvar=True, **kwargs)


def _setting(flag: str, name: str | None = None, **kwargs: Any) -> Callable[[F], F]:
    """A hub setting: unset by default, its variable EDINBOX_<FIELD> named after the HubConfig field it sets."""
    field = name or flag.removeprefix("--").replace("-", "_")
    return _option(flag, field, envvar=f"EDINBOX_{field.upper()}", default=None, **kwargs)


def db_options(func: F) -> F:
    """The options every command shares: --config, --db, --table, --consumer (and their EDINBOX_ variables)."""
    for decorator in reversed(
        [
            _setting("--config", type=click.Path(dir_okay=False, path_type=Path), help="hub.toml"),
            _setting("--db", help="postgresql://... or sqlite:///hub.db  [default: sqlite:///edinbox.db]"),
            _setting("--table", help="journal table, e.g. edi.inbox  [default: inbox]"),
            _setting("--consumer", help="consumer name in the journal  [default: accounting]"),
        ]
    ):
        func = decorator(func)
    return func


def _config(config: Path | None = None, **overrides: Any) -> HubConfig:
    """The file's settings (`--config`), overridden by the flags and EDINBOX_ variables that were given."""
    try:
        return load_config(config).with_overrides(**overrides)
    except InboxError as exc:
        raise click.UsageError(mask(str(exc))) from exc


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


def _echo(data: Mapping[str, Any] | Sequence[Mapping[str, Any]], *, as_json: bool, columns: Sequence[str] = ()) -> None:
    """Print a value as JSON (`--json`) or as people read it (a table for rows)."""
    text = render(data, as_json=as_json, columns=columns)
    if text:
        click.echo(text)


@main.command()
@db_options
@_setting("--source", help="dir:///srv/edi, amqp://..., nats://..., redis://..., kafka://...")
@_setting("--batch-size", type=int, help="deliveries settled per transaction  [default: 20]")
@_setting("--poll-timeout", type=float, help="seconds a receive waits  [default: 0.5]")
@_setting("--idle-timeout", type=float, help="with --once: idle seconds before exit [1.5]")
@_setting("--max-attempts", type=int, help="handler failures before a message is dead [5]")
@_setting("--horizon", help="the longest time a message can come back  [default: 7d]")
@_setting("--lease", help="claim length for a non-transactional accounting sink  [default: 5m]")
@_setting(
    "--non-edi",
    type=click.Choice(["reject", "inbox"]),
    help="payloads that are not EDI: park them, or key them by producer id  [default: reject]",
)
@_option(
    "--route",
    "routes",
    multiple=True,
    envvar="EDINBOX_ROUTES",
    metavar="TYPE=inbox|bypass",
    help="route a message type (repeatable), e.g. --route DESADV=bypass",
)
@_option("--once", is_flag=True, envvar="EDINBOX_ONCE", help="drain what is waiting, exit")
@_option("--log-format", type=click.Choice(["text", "json"]), default="text", envvar="EDINBOX_LOG_FORMAT")
@_option("--quiet", "-q", is_flag=True, envvar="EDINBOX_QUIET", help="log warnings and errors only")
@_setting(
    "--accounting",
    help="POST invoices to this HTTP API (lease mode, Idempotency-Key) instead of the invoices table",
)
@_setting("--give-up-after", help="exit 2 when the database or source stays down this long (5m, 1h)  [default: never]")
@_setting("--max-payload", help="bigger deliveries are parked unparsed (65536, 100KB, 32MiB)  [default: 32MiB]")
@_setting("--relay/--no-relay", "relay", help="also relay the outbox (acknowledgments)  [default: relay]")
def run(
    *, routes: tuple[str, ...], once: bool, log_format: str, quiet: bool, accounting: str | None, **settings: Any
) -> None:
    """Run the hub: settle deliveries from --source through the inbox into accounting, ack after commit.

    SIGTERM or Ctrl-C stops it gracefully (the batch in hand is finished and acked). An outage of the database or
    the source is waited out with backoff (one log line when it goes down, one when it is back), also at start.
    It runs no DDL: `edinbox init` creates the schema. EDINBOX_FAULT=after_commit:N arms the fault point: the
    process kills itself after the N-th commit, before the ack (for redelivery tests).

    Exit status: 0 stopped or drained (--once), 1 configuration (a setting, URL or missing schema: the message
    says which), 2 gave up (a dependency stayed down longer than --give-up-after).
    """
    from edinbox.hub._fault import parse_fault

    cfg = _routed(_config(**settings), routes)
    try:
        fault = parse_fault(os.environ.get("EDINBOX_FAULT"))
    except InboxError as exc:
        raise click.UsageError(str(exc)) from exc
    logging.basicConfig(
        level=logging.WARNING if quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    from edinbox._redact import RedactFilter

    redact = RedactFilter(urls=[u for u in (cfg.source, cfg.db, accounting) if u])
    for handler in logging.getLogger().handlers:  # third-party loggers (httpx, aio-pika, nats) print URLs too
        handler.addFilter(redact)
    # the hub logs one line per outage; stamina's line per retry would repeat it
    logging.getLogger("stamina").setLevel(logging.ERROR)
    try:
        totals = _run(_serve(cfg, fault=fault, once=once, log_json=log_format == "json", accounting=accounting))
    except click.ClickException as exc:
        if isinstance(exc.__cause__, TransientError):
            first = (exc.message.strip().splitlines() or [""])[0]
            click.echo(f"Error: gave up after {cfg.give_up_after}: {first}", err=True)
            sys.exit(EXIT_GAVE_UP)
        raise
    summary = " ".join(f"{k}={v}" for k, v in sorted(totals.items()))
    logging.getLogger("edinbox.hub").info(mask(f"stopped {summary}".strip()))


async def _serve(
    cfg: HubConfig, *, fault: Any, once: bool, log_json: bool, accounting: str | None = None
) -> dict[str, int]:
    from edinbox.hub._hub import open_hub

    sink: Any = None
    if accounting:
        from edinbox.hub.http_sink import HttpAccounting

        sink = HttpAccounting(accounting)
    from edinbox.hub._outage import Stopped

    stop = asyncio.Event()  # SIGTERM / Ctrl-C: while waiting for a dependency too, not only once running
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with open_hub(cfg, fault=fault, log_json=log_json, accounting=sink, stop=stop) as hub:
            logging.getLogger("edinbox.hub").info(
                mask(f"started consumer={cfg.consumer} db={cfg.db} source={cfg.source} batch_size={cfg.batch_size}")
            )
            return dict(await hub.run(once=once))
    except Stopped:
        return {}


@main.command()
@db_options
@_option(
    "--grant",
    "roles",
    multiple=True,
    envvar="EDINBOX_GRANT",
    metavar="ROLE",
    help="PostgreSQL: grant this runtime role what `run` needs and no more (repeatable)",
)
def init(*, roles: tuple[str, ...], **settings: Any) -> None:
    """Create the journal and the hub's tables (idempotent): the only command that changes the schema.

    Run it with the owner's rights; `--grant ROLE` then gives the role `edinbox run` uses USAGE on the schema,
    SELECT/INSERT/UPDATE/DELETE on the journal and the hub's tables, and their sequences (no DDL).
    """
    cfg = _config(**settings)
    _run(_ops.init(cfg, grant=roles))
    click.echo(f"ready: journal {cfg.table} and the hub's tables in {mask(cfg.db)}")
    for role in roles:
        click.echo(f"granted {role}: what `edinbox run` needs on them")


@main.command()
@db_options
@_setting("--source", help="also check that this source can be reached")
@_setting("--retention", help="how long journal rows are kept (purge age)  [default: 30d]")
@_setting("--horizon", help="the longest time a message can come back  [default: 7d]")
@_option("--json", "as_json", is_flag=True, envvar="EDINBOX_JSON", help="print JSON")
def doctor(*, as_json: bool, **settings: Any) -> None:
    """Check connectivity, the journal schema and unique key, the invoice key, and retention vs the horizon."""
    checks = _run(_ops.doctor(_config(**settings)))
    rows = [{"check": c.name, "status": c.status, "detail": c.detail} for c in checks]
    _echo(rows, as_json=as_json, columns=["check", "status", "detail"])
    if any(c.status == "fail" for c in checks):
        sys.exit(1)


@main.command()
@db_options
@_option("--json", "as_json", is_flag=True, envvar="EDINBOX_JSON", help="print one JSON object")
def stats(*, as_json: bool, **settings: Any) -> None:
    """Counts by outcome, rows by journal status, the oldest row's age and the table size."""
    _echo(_run(_ops.stats(_config(**settings))), as_json=as_json)


@main.command("list")
@db_options
@_option(
    "--status",
    type=click.Choice(["processed", "failed", "dead", "conflict", "in_progress", "rejected"]),
    help="only rows of this status (rejected: parked payloads that did not parse)",
)
@_option("--limit", default=50, show_default=True, type=click.IntRange(min=1))
@_option("--json", "as_json", is_flag=True, envvar="EDINBOX_JSON", help="print JSON")
def list_(*, status: str | None, limit: int, as_json: bool, **settings: Any) -> None:
    """List journal rows (newest first) or parked payloads (--status rejected)."""
    rows = _run(_ops.list_rows(_config(**settings), status=status, limit=limit))
    parked = status == "rejected"
    columns = (
        ["key", "status", "deliveries", "at", "reason"] if parked else ["key", "status", "attempts", "at", "error"]
    )
    _echo(rows, as_json=as_json, columns=columns)


@main.command()
@db_options
@click.argument("key")
@_option("--json", "as_json", is_flag=True, envvar="EDINBOX_JSON", help="print JSON")
def show(*, key: str, as_json: bool, **settings: Any) -> None:
    """Show one journal row (KEY = SOURCE/MESSAGE_ID, as `list` prints it) or a parked payload (rejected/ID)."""
    cfg = _config(**settings)
    data = _run(_ops.show(cfg, key))
    if data is None:
        raise click.ClickException(f"no row {key!r} for consumer {cfg.consumer!r}")
    _echo(data, as_json=as_json)


def _change(
    action: Callable[[HubConfig, str], Coroutine[Any, Any, bool]],
    key: str,
    settings: dict[str, Any],
    *,
    done: str,
    none: str,
) -> None:
    """Run a journal change on one key; say `done KEY`, or fail with `none KEY` when no row matched."""
    if not _run(action(_config(**settings), key)):
        raise click.ClickException(f"{none} {key!r}")
    click.echo(f"{done} {key}")


@main.command()
@db_options
@click.argument("key")
def requeue(*, key: str, **settings: Any) -> None:
    """Make a dead or conflicting message processable again (its next delivery runs the handler)."""
    _change(_ops.requeue, key, settings, done="requeued", none="no dead or conflicting row")


@main.command()
@db_options
@click.argument("key")
@click.confirmation_option(prompt="Forget this key? Its next delivery will be processed again.", show_envvar=True)
def forget(*, key: str, **settings: Any) -> None:
    """Delete a journal row on purpose, so that the next delivery of the key is processed again."""
    _change(_ops.forget, key, settings, done="forgot", none="no row")


@main.command()
@db_options
@_setting(
    "--older-than",
    "retention",
    help="age of the rows to delete (30d, 12h, ...)  [default: 30d]",
)
@_setting("--horizon", help="the longest time a message can come back  [default: 7d]")
@_option("--batch-size", default=1000, show_default=True, type=click.IntRange(min=1))
def purge(*, batch_size: int, **settings: Any) -> None:
    """Delete settled journal rows older than --older-than in bounded batches (never younger than the horizon)."""
    cfg = _config(**settings)
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
@_option("--messages", default=500, show_default=True, type=click.IntRange(min=1), help="interchanges")
@_option(
    "--duplicate-rate",
    default=0.2,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="share of invoices a producer publishes twice",
)
@_option(
    "--crash-rate",
    default=0.15,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="chance that a hub process is killed after a commit, before its ack",
)
@_option("--seed", default=7, show_default=True, type=int, help="same seed, same traffic")
@_option("--db", envvar="EDINBOX_DB", default=None, help="[default: SQLite in the work dir]")
@_option("--table", default=None, help="journal table  [default: inbox; a fresh schema on PostgreSQL]")
@_option("--workers", default=2, show_default=True, type=click.IntRange(1, 8), help="hub processes")
@_option("--dir", "workdir", type=click.Path(file_okay=False, path_type=Path), help="spool + logs [temp dir]")
@_option("--json", "as_json", is_flag=True, envvar="EDINBOX_JSON", help="print the report as JSON")
def demo(*, as_json: bool, **options: Any) -> None:
    """Run the hub on generated partner interchanges with duplicates and real crashes; check the invoices."""
    from edinbox.hub._demo import run_demo

    with _errors():
        report = run_demo(**options, echo=(lambda text: None) if as_json else click.echo)
    click.echo(json.dumps(report.as_dict()) if as_json else report.render())
    sys.exit(0 if report.ok else 1)


@main.command()
@db_options
@_option("--once", is_flag=True, envvar="EDINBOX_ONCE", help="send what is waiting, exit")
@_option("--limit", default=100, show_default=True, type=click.IntRange(min=1), help="rows per pass")
@_setting("--give-up-after", help="exit 2 when the database stays down this long (5m, 1h)  [default: never]")
def relay(*, once: bool, limit: int, **settings: Any) -> None:
    """Send the outbox's committed rows (acknowledgments) to their destinations, the key as the producer id.

    `edinbox run` relays by default; run this for a relay of its own (several share a PostgreSQL outbox).
    EDINBOX_FAULT=after_send:N kills the process after the N-th send, before its rows are marked sent.
    """
    from edinbox.hub._fault import parse_fault

    cfg = _config(**settings)
    with _errors():
        fault = parse_fault(os.environ.get("EDINBOX_FAULT"))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s", stream=sys.stderr)
    logging.getLogger("stamina").setLevel(logging.ERROR)

    async def serve() -> dict[str, int]:
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        return await _ops.relay(cfg, stop=stop, once=once, limit=limit, fault=fault)

    totals = _run(serve())
    click.echo(f"relayed sent={totals.get('sent', 0)} parked={totals.get('parked', 0)}")


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_option("--to", "url", required=True, envvar="EDINBOX_PUBLISH_TO", help="broker or spool URL")
@_option("--raw", is_flag=True, help="send each file whole, keyed by its file name, without parsing it")
def publish(*, files: tuple[Path, ...], url: str, raw: bool) -> None:
    """Send the interchanges in FILES to a broker, the producer id set to each interchange's key."""
    from edinbox._publish import split_files
    from edinbox.sources import publisher

    async def send(messages: list[tuple[str, bytes]]) -> None:
        await publisher(url)(url, messages)

    with _errors():
        messages = split_files(files, raw=raw)
    _run(send(messages))
    for message_id, payload in messages:
        click.echo(f"{message_id}\t{len(payload)} bytes")
    click.echo(f"published {len(messages)} message(s) from {len(files)} file(s) to {mask(url)}")


if __name__ == "__main__":
    main()
