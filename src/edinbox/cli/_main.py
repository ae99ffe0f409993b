"""The `edinbox` command: the EDI hub and the operator's commands.

Every setting is a flag, an `EDINBOX_` environment variable (shown in `--help`) or a key of the TOML file given
with `--config`; flags win over the environment, which wins over the file. Only this module reads the environment.
How a command declares its options, and the checks it runs before touching data: `edinbox.cli._commands`.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, NoReturn

import click

from edinbox._errors import InboxError, TransientError
from edinbox._stopping import stop_on_signals
from edinbox.cli import _store as _cli_store
from edinbox.cli._commands import Commands, Number, db_options, hub_settings, load
from edinbox.cli._commands import echo as _echo
from edinbox.cli._commands import errors as _errors
from edinbox.cli._commands import json_option as _json
from edinbox.cli._commands import option as _option
from edinbox.cli._commands import run as _run
from edinbox.cli._commands import say as _say
from edinbox.cli._commands import secrets as _secrets
from edinbox.cli._commands import setting as _setting
from edinbox.cli._ledger import ledger
from edinbox.hub import ops as _ops
from edinbox.hub.config import HubConfig, log_event

__all__ = ["main"]

EXIT_GAVE_UP = 2
"""`run --give-up-after`: a dependency stayed down longer than that."""

MAX_ROWS = 100_000
"""The most rows one `list`, `purge` batch or relay pass may ask for."""
MAX_MESSAGES = 1_000_000
"""The most interchanges `demo` and `chaos` generate."""
MAX_SECONDS = 86400.0
"""The longest time in seconds a `chaos` option may give (a day)."""
SEED = click.IntRange(0, 2**63 - 1)
"""A seed of the generated traffic."""


def _version() -> str:
    """The installed distribution's version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("edinbox")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree without installing
        return "unknown"


@click.group(
    cls=Commands,
    context_settings={"auto_envvar_prefix": "EDINBOX", "help_option_names": ["-h", "--help"], "show_default": True},
)
@click.version_option(_version(), "--version", prog_name="edinbox")
def main() -> None:
    """edinbox: each partner interchange creates its invoice once, however often the broker redelivers.

    Settings come from flags, EDINBOX_ environment variables (see each command's --help) or a TOML file (--config;
    `edinbox config --example` prints one). Exit status: 0 done, 1 configuration (a flag, setting, URL, missing
    extra or the schema: see the message) or a one-shot command's dependency down, 2 `run` gave up after
    --give-up-after.
    """


def _config(**settings: Any) -> HubConfig:
    """The checked settings of a command (`**settings` as its options gave them): see `edinbox.cli._commands`."""
    return hub_settings(settings)


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


_log_format = _option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    envvar="EDINBOX_LOG_FORMAT",
    help="each log line logfmt (text) or one JSON object (json)",
)


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


@main.command()
@db_options
@_setting("--source")
@_setting("--batch-size")
@_setting("--poll-timeout")
@_setting("--idle-timeout")
@_setting("--max-attempts")
@_setting("--retry-immediate")
@_setting("--retry-first")
@_setting("--dead-letters")
@_setting("--horizon")
@_setting("--lease")
@_setting("--non-edi")
@_option(
    "--route",
    "routes",
    multiple=True,
    envvar="EDINBOX_ROUTES",
    metavar="TYPE=inbox|bypass",
    help="route a message type (repeatable), e.g. --route DESADV=bypass",
)
@_option("--once", is_flag=True, envvar="EDINBOX_ONCE", help="drain what is waiting, exit")
@_log_format
@_option("--quiet", "-q", is_flag=True, envvar="EDINBOX_QUIET", help="log warnings and errors only")
@_setting("--accounting")
@_setting("--accounting-token-file")
@_setting("--give-up-after")
@_setting("--max-payload")
@_setting("--retention")
@_setting("--purge-every")
@_setting("--purge-max-rate")
@_option("--no-relay", is_flag=True, envvar="EDINBOX_NO_RELAY", help="do not relay the outbox here (`edinbox relay`)")
@_setting("--metrics-port")
@_setting("--metrics-host")
@_setting("--metrics-public", is_flag=True)
@_json
def run(
    *, routes: tuple[str, ...], once: bool, log_format: str, quiet: bool, as_json: bool, no_relay: bool, **settings: Any
) -> None:
    """Run the hub: settle deliveries from --source through the inbox into accounting, ack after commit.

    SIGTERM or Ctrl-C stops it gracefully (the batch in hand is finished and acked; idle, within about a second
    whatever --poll-timeout); a second one exits at once (status 143 or 130). It purges journal rows older than
    --retention every --purge-every (1h; off: never), once at start too. An outage of the database or
    the source is waited out with backoff (one log line when it goes down, one when it is back), also at start.
    It runs no DDL: `edinbox init` creates the schema (and the spool folder). EDINBOX_FAULT=after_commit:N arms the
    fault point: the process kills itself after the N-th commit, before the ack (for redelivery tests);
    relay_start:N kills each of the first N relay processes as it starts. --json prints the totals as one JSON
    object when it stops. The --accounting API's bearer token is read from --accounting-token-file, else from
    EDINBOX_ACCOUNTING_TOKEN (never from a flag's value, which `ps` shows).

    Exit status: 0 stopped or drained (--once), 1 configuration (a setting, URL, missing extra, missing database or
    spool folder, missing schema: the message says which), 2 gave up (a dependency stayed down longer than
    --give-up-after), 143 / 130 stopped at once by a second SIGTERM / Ctrl-C.
    """
    from edinbox.hub.config import parse_fault

    try:
        fault = parse_fault(os.environ.get("EDINBOX_FAULT"))
    except InboxError as exc:
        raise click.UsageError(str(exc)) from exc
    cfg = _routed(_config(**settings), routes)
    if no_relay:  # not a setting of the file: `load` takes only the settings' own flags
        cfg = cfg.with_overrides(relay=False)
    _logging(cfg, quiet=quiet, json=log_format == "json")
    try:
        totals = _run(_serve(cfg, fault=fault, once=once))
    except click.ClickException as exc:
        gave_up = isinstance(exc.__cause__, TransientError)
        message = exc.format_message()
        if gave_up:
            message = f"gave up after {cfg.give_up_after}: {(message.strip().splitlines() or [''])[0]}"
        code = EXIT_GAVE_UP if gave_up else exc.exit_code
        if log_format == "json":  # the last line a record too, as every line before it
            log_event(logging.getLogger("edinbox.hub"), logging.ERROR, "exited", {"status": code, "error": message})
            sys.exit(code)
        if gave_up:
            _say(f"Error: {message}", err=True)
            sys.exit(code)
        raise
    log_event(logging.getLogger("edinbox.hub"), logging.INFO, "stopped", dict(sorted(totals.items())))
    if as_json:
        _echo(totals, as_json=True)


def _logging(cfg: HubConfig, *, quiet: bool = False, json: bool = False) -> None:
    """Log to stderr as the hub does (`edinbox.hub.config.configure`: logfmt, or JSON with `json`), passwords of the
    configured URLs masked."""
    from edinbox.hub.config import configure

    urls = [u for u in (cfg.source, cfg.db, cfg.accounting) if u]
    configure(urls, level=logging.WARNING if quiet else logging.INFO, known=_secrets(), json=json)


async def _serve(cfg: HubConfig, *, fault: Any, once: bool) -> dict[str, int]:
    from edinbox.hub.deliveries import open_hub
    from edinbox.hub.partners import report_to

    sink: Any = None
    if cfg.accounting:
        from edinbox.hub.sinks import HttpAccounting

        sink = HttpAccounting(cfg.accounting, token=_accounting_token(cfg))
    from edinbox.loop import Stopped

    stop = stop_on_signals()  # while waiting for a dependency too, not only once running
    metrics, server = _metrics(cfg)
    report_to(metrics)  # the partner registry's refusals: counted and logged as they settle
    try:
        async with open_hub(cfg, fault=fault, accounting=sink, stop=stop, metrics=metrics) as hub:
            fields = {"consumer": cfg.consumer, "db": cfg.db, "source": cfg.source, "batch_size": cfg.batch_size}
            log_event(logging.getLogger("edinbox.hub"), logging.INFO, "started", fields)
            return dict(await hub.run(once=once))
    except Stopped:
        return {}
    finally:
        if server is not None:
            server.shutdown()


def _accounting_token(cfg: HubConfig) -> str | None:
    """The accounting API's bearer token: the file `accounting_token_file` names, else EDINBOX_ACCOUNTING_TOKEN;
    one warning line when it would cross the network in clear (http:// to another host than loopback)."""
    from urllib.parse import urlsplit

    from edinbox._hosts import is_loopback
    from edinbox.hub.sinks import TOKEN_VARIABLE, read_token

    token = read_token(cfg.accounting_token_file) if cfg.accounting_token_file else os.environ.get(TOKEN_VARIABLE)
    url = urlsplit(cfg.accounting)
    if token and url.scheme == "http" and not is_loopback(url.hostname or ""):
        fields = {"host": url.hostname, "advice": "use https:// or a loopback address"}
        log_event(logging.getLogger("edinbox.hub"), logging.WARNING, "accounting-token-cleartext", fields)
    return token or None


def _metrics(cfg: HubConfig) -> tuple[Any, Any]:
    """The hub's Prometheus instruments and the server of GET /metrics, when `metrics_port` asks for them: partner
    labels for the partners with an agreement, message types those known and routed (others count as `other`)."""
    if not cfg.metrics_port:
        return None, None
    from edinbox._hosts import is_loopback
    from edinbox.metrics import MESSAGE_TYPES, Metrics

    metrics = Metrics(partners=cfg.partners, message_types=[*MESSAGE_TYPES, *cfg.routes])
    try:
        server = metrics.serve(cfg.metrics_port, host=cfg.metrics_host, public=cfg.metrics_public)
    except OSError as exc:
        raise click.UsageError(f"cannot serve /metrics on {cfg.metrics_host}:{cfg.metrics_port}: {exc}") from exc
    if not is_loopback(cfg.metrics_host):
        fields = {"host": cfg.metrics_host, "port": cfg.metrics_port, "authentication": "none"}
        log_event(logging.getLogger("edinbox.hub"), logging.WARNING, "metrics-public", fields)
    return metrics, server


@main.command()
@db_options
@_setting("--source", help="also create this spool folder (dir:///srv/edi) with its inbound/, archive/, ... folders")
@_option(
    "--grant",
    "roles",
    multiple=True,
    envvar="EDINBOX_GRANT",
    metavar="ROLE",
    help="PostgreSQL: grant this runtime role what `run` needs and no more (repeatable)",
)
@_json
def init(*, roles: tuple[str, ...], as_json: bool, **settings: Any) -> None:
    """Create the journal and the hub's tables (idempotent), and the spool folder of --source: the only command that
    creates anything.

    Run it with the owner's rights; `--grant ROLE` then gives the role `edinbox run` uses USAGE on the schema,
    SELECT/INSERT/UPDATE/DELETE on the journal and the hub's tables, and their sequences (no DDL).
    """
    cfg = hub_settings(settings, creates=True)
    _run(_ops.init(cfg, grant=roles))
    if as_json:
        _echo({"db": cfg.db, "table": cfg.table, "source": cfg.source, "granted": list(roles)}, as_json=True)
        return
    _say(f"ready: journal {cfg.table} and the hub's tables in {cfg.db}")
    if cfg.source:
        _say(f"ready: source {cfg.source}")
    for role in roles:
        click.echo(f"granted {role}: what `edinbox run` needs on them")


@main.command()
@db_options
@_json
def migrate(*, as_json: bool, **settings: Any) -> None:
    """Upgrade the journal from an older schema version to this edinbox's, rows kept (idempotent).

    Each step runs in one transaction under the schema lock; run it with the owner's rights, before `run`.
    """
    result = _run(_ops.migrate(_config(**settings)))
    if as_json:
        _echo(result, as_json=True)
    else:
        click.echo(_ops.migration_summary(result))


@main.command()
@db_options
@_setting("--source", help="also check that this source can be reached")
@_setting("--retention")
@_setting("--horizon")
@_setting("--dead-letters", help="also check where messages parked DEAD are published")
@_json
def doctor(*, as_json: bool, **settings: Any) -> None:
    """Check connectivity, the journal schema and unique key, the invoice key, and retention vs the horizon."""
    checks = _run(_ops.doctor(_config(**settings)))
    rows = [{"check": c.name, "status": c.status, "detail": c.detail} for c in checks]
    _echo(rows, as_json=as_json, columns=["check", "status", "detail"])
    if any(c.status == "fail" for c in checks):
        sys.exit(1)


@main.command()
@db_options
@_json
def stats(*, as_json: bool, **settings: Any) -> None:
    """Counts by outcome, rows by journal status, the oldest row's age and the table size.

    A consumer with no rows at all (a typo of --consumer?) is said on stderr; the exit status stays 0.
    """
    cfg = _config(**settings)
    data = _run(_ops.stats(cfg))
    if not data["journal_rows"] and not data.get("received") and not data.get("rejected"):
        _say(f"note: consumer {cfg.consumer!r} has no rows in {cfg.table} (is --consumer right?)", err=True)
    _echo(data, as_json=as_json)


@main.command("list")
@db_options
@_option(
    "--status",
    type=click.Choice(["processed", "failed", "requeued", "dead", "conflict", "in_progress", "rejected"]),
    help="only rows of this status (rejected: parked payloads that did not parse)",
)
@_option("--limit", default=50, type=click.IntRange(1, MAX_ROWS))
@_json
def list_(*, status: str | None, limit: int, as_json: bool, **settings: Any) -> None:
    """List journal rows (newest first) or parked payloads (--status rejected)."""
    rows = _run(_ops.list_rows(_config(**settings), status=status, limit=limit))
    parked = status == "rejected"
    columns = (
        ["key", "status", "deliveries", "at", "reason"]
        if parked
        else ["key", "status", "attempts", "at", "retry_at", "error"]
    )
    _echo(rows, as_json=as_json, columns=columns)


@main.command()
@db_options
@click.argument("key")
@_json
@_option(
    "--payload",
    "payload_file",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="write the stored payload's raw bytes to this file",
)
def show(*, key: str, as_json: bool, payload_file: Path | None, **settings: Any) -> None:
    """Show one journal row (KEY = SOURCE/MESSAGE_ID, as `list` prints it: a `/` inside a part is %2F) or a parked
    payload (rejected/ID).

    Payloads are previewed: EDI one segment per line, text as text, anything else as hex; --payload FILE writes
    the raw bytes.
    """
    cfg = _config(**settings)
    data = _run(_ops.show(cfg, key))
    if data is None:
        raise click.ClickException(f"no row {key!r} for consumer {cfg.consumer!r}")
    if payload_file is not None:
        size = _run(_ops.write_payload(cfg, key, payload_file))
        click.echo(f"wrote {size} bytes to {payload_file}", err=True)
    if as_json:
        _say(json.dumps(_secrets().data(data), default=str))
    else:
        _say(_ops.render_shown(data))


def _change(
    action: Callable[[HubConfig, str], Coroutine[Any, Any, bool]],
    key: str,
    settings: dict[str, Any],
    *,
    as_json: bool,
    done: str,
    none: str,
) -> None:
    """Run a journal change on one key; say `done KEY`, or fail with `none KEY` when no row matched."""
    if not _run(action(_config(**settings), key)):
        raise click.ClickException(f"{none} {key!r}")
    if as_json:
        _echo({"key": key, "done": done}, as_json=True)
    else:
        click.echo(f"{done} {key}")


@main.command()
@db_options
@click.argument("key")
@_json
def requeue(*, key: str, as_json: bool, **settings: Any) -> None:
    """Make a dead or conflicting message processable again (its next delivery runs the handler)."""
    _change(_ops.requeue, key, settings, as_json=as_json, done="requeued", none="no dead or conflicting row")


@main.command()
@db_options
@click.argument("key")
@click.confirmation_option(prompt="Forget this key? Its next delivery will be processed again.", show_envvar=True)
@_json
def forget(*, key: str, as_json: bool, **settings: Any) -> None:
    """Delete a journal row on purpose, so that the next delivery of the key is processed again."""
    _change(_ops.forget, key, settings, as_json=as_json, done="forgot", none="no row")


@main.command()
@db_options
@click.argument("key")
@_setting("--source", help="the hub's source, where a replay goes unless --to says otherwise")
@_option("--to", "to", envvar="EDINBOX_REPLAY_TO", help="publish here instead (a broker or spool URL)")
@_json
def replay(*, key: str, to: str | None, as_json: bool, **settings: Any) -> None:
    """Re-publish the payload stored under KEY (SOURCE/MESSAGE_ID after `requeue`, or rejected/N) with its key.

    It goes to the hub's source (--source) unless --to names another broker or spool, through the same publisher
    as `edinbox publish`; the hub then settles it as any delivery.
    """
    from edinbox.hub.ops import replay as replay_stored

    done = _run(replay_stored(_config(**settings), key, to=to))
    if as_json:
        _echo(done, as_json=True)
    else:
        _say(f"replayed {done['key']} as {done['message_id']} to {done['to']}")


@main.command()
@db_options
@_setting("--older-than", "retention", help="age of the rows to delete (30d, 12h, ...)")
@_setting("--horizon")
@_setting("--max-rate", "purge_max_rate")
@_option("--batch-size", default=1000, type=click.IntRange(1, MAX_ROWS))
@_json
def purge(*, batch_size: int, as_json: bool, **settings: Any) -> None:
    """Delete settled journal rows older than --older-than in bounded batches (never younger than the horizon),
    at most --max-rate rows per second, and the parked payloads rejected before that. `run --purge-every` does the
    same periodically."""
    cfg = _config(**settings)
    with click.progressbar(length=1, label=f"purging rows older than {cfg.retention}", file=sys.stderr) as bar:
        shown = 0

        def progress(deleted: int, total: int) -> None:
            nonlocal shown
            bar.length = total
            bar.update(deleted - shown)
            shown = deleted

        purged = _run(_ops.purge(cfg, older_than=cfg.retention, batch_size=batch_size, progress=progress))
    if as_json:
        _echo({"purged": purged.rows, "rejected": purged.rejected, "older_than": cfg.retention}, as_json=True)
    else:
        click.echo(f"purged {purged.rows} rows and {purged.rejected} rejected payloads older than {cfg.retention}")


@main.command()
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


@main.command()
@db_options
@_option("--once", is_flag=True, envvar="EDINBOX_ONCE", help="send what is waiting, exit")
@_option("--limit", default=100, show_default=True, type=click.IntRange(1, MAX_ROWS), help="rows per pass")
@_setting("--give-up-after")
@_setting("--destinations")
@_setting("--dead-letters")
@_log_format
@_json
def relay(*, once: bool, limit: int, log_format: str, as_json: bool, **settings: Any) -> None:
    """Send the outbox's committed rows (acknowledgments) to their destinations, the key as the producer id.

    `edinbox run` relays by default; run this for a relay of its own (several share a PostgreSQL outbox).
    EDINBOX_FAULT=after_send:N kills the process after the N-th send, before its rows are marked sent.
    """
    from edinbox.hub.config import parse_fault

    cfg = _config(**settings)
    with _errors():
        fault = parse_fault(os.environ.get("EDINBOX_FAULT"))
    _logging(cfg, json=log_format == "json")

    async def serve() -> dict[str, int]:
        stop = stop_on_signals()
        return await _ops.relay(cfg, stop=stop, once=once, limit=limit, fault=fault)

    totals = _run(serve())
    done = {"sent": totals.get("sent", 0), "parked": totals.get("parked", 0)}
    click.echo(json.dumps(done) if as_json else f"relayed sent={done['sent']} parked={done['parked']}")


@main.command()
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


@main.command()
@db_options
@_option("--host", default="127.0.0.1", envvar="EDINBOX_CONSOLE_HOST", help="address to bind")
@_option("--port", default=8080, type=click.IntRange(1, 65535), envvar="EDINBOX_CONSOLE_PORT", help="port to bind")
@_option(
    "--token-file",
    envvar="EDINBOX_CONSOLE_TOKEN_FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="file holding the token every page asks for (or EDINBOX_CONSOLE_TOKEN); needed to bind another address",
)
@click.option("--token", hidden=True, allow_from_autoenv=False, help="refused: a token in argv shows in ps")
@_option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    envvar="EDINBOX_CONSOLE_ALLOWED_HOST",
    help="a host name the console answers to besides loopback's (repeatable)",
)
@_option("--certfile", envvar="EDINBOX_CONSOLE_CERTFILE", type=click.Path(path_type=Path), help="TLS certificate")
@_option("--keyfile", envvar="EDINBOX_CONSOLE_KEYFILE", type=click.Path(path_type=Path), help="TLS private key")
@_option("--allow-http", is_flag=True, help="serve plain HTTP beyond loopback (a TLS proxy in front)")
@_json
def console(
    *,
    host: str,
    port: int,
    token_file: Path | None,
    token: str | None,
    allowed_hosts: tuple[str, ...],
    certfile: Path | None,
    keyfile: Path | None,
    allow_http: bool,
    as_json: bool,
    **settings: Any,
) -> None:
    """Serve the operator console: search, messages, requeue / forget with an audit trail, the dashboard.

    It binds 127.0.0.1 unless --host says otherwise. Any other address needs a token of 16 characters or more,
    read from --token-file or EDINBOX_CONSOLE_TOKEN (never the command line, where `ps` shows it), and TLS
    (--certfile and --keyfile) unless --allow-http. It answers only to loopback host names, the bound address and
    each --allowed-host (400 otherwise). It prints where it listens (one JSON object with --json), then serves
    until Ctrl-C or SIGTERM.
    """
    from edinbox.console import check_bind, check_tls, check_token, serve

    with _errors():
        secret = _console_token(token_file, argv=token)
        check_token(secret)
        check_tls(certfile, keyfile)
        check_bind(host, secret, tls=certfile is not None, allow_http=allow_http)  # before anything else
    cfg = _config(**settings)
    scheme = "https" if certfile else "http"
    where = {"console": f"{scheme}://{_bracketed(host)}:{port}/", "db": cfg.db, "consumer": cfg.consumer}
    _echo(where, as_json=as_json)
    if allow_http and certfile is None and secret:
        click.echo("warning: the console's token and pages travel in clear up to the TLS proxy", err=True)
    if host in ("0.0.0.0", "::") and not allowed_hosts:  # noqa: S104 - the wildcard binds, compared
        click.echo(
            "warning: the console answers only to loopback names: add --allowed-host NAME for the name clients use",
            err=True,
        )
    with _errors():
        serve(
            cfg,
            host=host,
            port=port,
            token=secret,
            allowed_hosts=allowed_hosts,
            certfile=certfile,
            keyfile=keyfile,
            allow_http=allow_http,
        )


def _bracketed(host: str) -> str:
    """An address as a URL writes it: an IPv6 one in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


MAX_TOKEN_FILE = 4096
"""The largest token file read, in bytes."""


def _console_token(path: Path | None, *, argv: str | None) -> str | None:
    """The console's token: from the file `path` (its last line break dropped) or EDINBOX_CONSOLE_TOKEN, not both;
    ConfigurationError for one given on the command line or a file that cannot be read."""
    from edinbox._errors import ConfigurationError
    from edinbox._files import read_small

    if argv is not None:
        raise ConfigurationError(
            "--token is refused (the command line shows in ps): put the token in a file given with --token-file, "
            "or in EDINBOX_CONSOLE_TOKEN"
        )
    env = os.environ.get("EDINBOX_CONSOLE_TOKEN")
    if path is None:
        return env
    if env is not None:
        raise ConfigurationError("give the console token once: --token-file or EDINBOX_CONSOLE_TOKEN, not both")
    data = read_small(path, what="token file", limit=MAX_TOKEN_FILE)
    if len(data) > MAX_TOKEN_FILE:
        raise ConfigurationError(f"the token file {path} is over {MAX_TOKEN_FILE} bytes: it should hold the token")
    try:
        return data.decode().removesuffix("\n").removesuffix("\r")
    except UnicodeDecodeError:
        raise ConfigurationError(f"the token file {path} is not UTF-8 text") from None


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_option("--to", "url", required=True, envvar="EDINBOX_PUBLISH_TO", help="broker or spool URL")
@_option("--raw", is_flag=True, help="send each file whole, keyed by its file name, without parsing it")
@_json
def publish(*, files: tuple[Path, ...], url: str, raw: bool, as_json: bool) -> None:
    """Send the interchanges in FILES to a broker, the producer id set to each interchange's key."""
    from edinbox.hub.ops import send, split_files
    from edinbox.sources import check_source

    with _errors():
        check_source(url)
        messages = split_files(files, raw=raw, warn=lambda text: click.echo(f"warning: {text}", err=True))
    _run(send(url, messages))
    rows = [{"key": message_id, "bytes": len(payload)} for message_id, payload in messages]
    if as_json:
        _echo({"to": url, "files": len(files), "messages": rows}, as_json=True)
        return
    for row in rows:
        click.echo(f"{row['key']}\t{row['bytes']} bytes")
    _say(f"published {len(messages)} message(s) from {len(files)} file(s) to {url}")


@main.command("config")
@db_options
@_setting("--source")
@_option("--show", "mode", flag_value="show", default=True, help="the effective settings and where each comes from")
@_option("--example", "mode", flag_value="example", help="a commented hub.toml with every setting at its default")
@_json
def config_(*, mode: str, as_json: bool, **settings: Any) -> None:
    """Print the effective settings with their origin (file, variable, flag, default), passwords masked, or
    (--example) a commented hub.toml generated from the settings model."""
    from edinbox.hub.config import example_toml

    if mode == "example":
        text = example_toml()
        click.echo(json.dumps({"example": text}) if as_json else text, nl=as_json)
        return
    _echo(load(settings).rows(), as_json=as_json, columns=["setting", "value", "origin"])


main.add_command(ledger)
main.add_command(_cli_store.search)
main.add_command(_cli_store.export)

if __name__ == "__main__":
    main()
