"""`edinbox run` and `edinbox relay`: the commands that run until stopped, logging as the hub does (logfmt
or JSON), stopped by SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any

import click

from edinbox._async_inbox import AsyncInbox
from edinbox._errors import InboxError, TransientError
from edinbox._stopping import stop_on_signals
from edinbox.cli._commands import MAX_ROWS, command, db_options
from edinbox.cli._commands import echo as _echo
from edinbox.cli._commands import errors as _errors
from edinbox.cli._commands import hub_config as _config
from edinbox.cli._commands import json_option as _json
from edinbox.cli._commands import log_format as _log_format
from edinbox.cli._commands import opened as _opened
from edinbox.cli._commands import option as _option
from edinbox.cli._commands import run as _run
from edinbox.cli._commands import say as _say
from edinbox.cli._commands import secrets as _secrets
from edinbox.cli._commands import setting as _setting
from edinbox.hub import ops as _ops
from edinbox.hub.config import HubConfig, duration_text, log_event

__all__ = ["relay", "run"]

EXIT_GAVE_UP = 2
"""`run --give-up-after`: a dependency stayed down longer than that."""


def _routed(cfg: HubConfig, routes: tuple[str, ...]) -> HubConfig:
    """Apply `--route TYPE=ROUTE` options over the configured routes."""
    if not routes:
        return cfg
    table: dict[str, str] = dict(cfg.routes)
    for entry in routes:
        kind, sep, route = entry.partition("=")
        if not sep or not kind:
            raise click.BadParameter(f"{entry!r}: expected TYPE=inbox or TYPE=bypass", param_hint="--route")
        table[kind.strip().upper()] = route.strip()
    try:
        return cfg.with_overrides(routes=table)
    except InboxError as exc:
        raise click.BadParameter(str(exc), param_hint="--route") from exc


@command()
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
            message = f"gave up after {duration_text(cfg.give_up_after)}: {(message.strip().splitlines() or [''])[0]}"
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


@command()
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

    async def serve(inbox: AsyncInbox) -> dict[str, int]:
        stop = stop_on_signals()
        return await _ops.relay(inbox, config=cfg, stop=stop, once=once, limit=limit, fault=fault)

    totals = _opened(cfg, serve)
    done = {"sent": totals.get("sent", 0), "parked": totals.get("parked", 0)}
    click.echo(json.dumps(done) if as_json else f"relayed sent={done['sent']} parked={done['parked']}")
