"""The operator's commands on a hub's journal: `init`, `migrate`, `doctor`, `stats`, `list`, `show`, `requeue`,
`forget`, `replay` and `purge`, each printing a table, key/value lines or (`--json`) one JSON value.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import click

from edinbox._async_inbox import AsyncInbox
from edinbox.cli._commands import MAX_ROWS, command, db_options, hub_settings
from edinbox.cli._commands import echo as _echo
from edinbox.cli._commands import hub_config as _config
from edinbox.cli._commands import json_option as _json
from edinbox.cli._commands import opened as _opened
from edinbox.cli._commands import option as _option
from edinbox.cli._commands import say as _say
from edinbox.cli._commands import secrets as _secrets
from edinbox.cli._commands import setting as _setting
from edinbox.hub import ops as _ops
from edinbox.hub.config import duration_text

__all__ = ["doctor", "forget", "init", "list_", "migrate", "purge", "replay", "requeue", "show", "stats"]


@command()
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
    _opened(cfg, lambda inbox: _ops.init(inbox, config=cfg, grant=roles))
    if as_json:
        _echo({"db": cfg.db, "table": cfg.table, "source": cfg.source, "granted": list(roles)}, as_json=True)
        return
    _say(f"ready: journal {cfg.table} and the hub's tables in {cfg.db}")
    if cfg.source:
        _say(f"ready: source {cfg.source}")
    for role in roles:
        click.echo(f"granted {role}: what `edinbox run` needs on them")


@command()
@db_options
@_json
def migrate(*, as_json: bool, **settings: Any) -> None:
    """Upgrade the journal from an older schema version to this edinbox's, rows kept (idempotent).

    Each step runs in one transaction under the schema lock; run it with the owner's rights, before `run`.
    """
    cfg = _config(**settings)
    result = _opened(cfg, lambda inbox: _ops.migrate(inbox, table=cfg.table))
    if as_json:
        _echo(result, as_json=True)
    else:
        click.echo(_ops.migration_summary(result))


@command()
@db_options
@_setting("--source", help="also check that this source can be reached")
@_setting("--retention")
@_setting("--horizon")
@_setting("--dead-letters", help="also check where messages parked DEAD are published")
@_json
def doctor(*, as_json: bool, **settings: Any) -> None:
    """Check connectivity, the journal schema and unique key, the invoice key, and retention vs the horizon."""
    cfg = _config(**settings)
    checks = _opened(cfg, lambda inbox: _ops.doctor(inbox, config=cfg))
    rows = [{"check": c.name, "status": c.status, "detail": c.detail} for c in checks]
    _echo(rows, as_json=as_json, columns=["check", "status", "detail"])
    if any(c.status == "fail" for c in checks):
        sys.exit(1)


@command()
@db_options
@_json
def stats(*, as_json: bool, **settings: Any) -> None:
    """Counts by outcome, rows by journal status, the oldest row's age and the table size.

    A consumer with no rows at all (a typo of --consumer?) is said on stderr; the exit status stays 0.
    """
    cfg = _config(**settings)
    data = _opened(cfg, _ops.stats)
    if not data["journal_rows"] and not data.get("received") and not data.get("rejected"):
        _say(f"note: consumer {cfg.consumer!r} has no rows in {cfg.table} (is --consumer right?)", err=True)
    _echo(data, as_json=as_json)


@command("list")
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
    rows = _opened(_config(**settings), lambda inbox: _ops.list_rows(inbox, status=status, limit=limit))
    parked = status == "rejected"
    columns = (
        ["key", "status", "deliveries", "at", "reason"]
        if parked
        else ["key", "status", "attempts", "at", "retry_at", "error"]
    )
    _echo(rows, as_json=as_json, columns=columns)


@command()
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

    async def read(inbox: AsyncInbox) -> tuple[dict[str, Any] | None, int | None]:
        data = await _ops.show(inbox, key)
        if data is None or payload_file is None:
            return data, None
        return data, await _ops.write_payload(inbox, key, payload_file)

    data, size = _opened(cfg, read)
    if data is None:
        raise click.ClickException(f"no row {key!r} for consumer {cfg.consumer!r}")
    if size is not None:
        click.echo(f"wrote {size} bytes to {payload_file}", err=True)
    if as_json:
        _say(json.dumps(_secrets().data(data), default=str))
    else:
        _say(_ops.render_shown(data))


def _change(
    action: Callable[[AsyncInbox, str], Awaitable[bool]],
    key: str,
    settings: dict[str, Any],
    *,
    as_json: bool,
    done: str,
    none: str,
) -> None:
    """Run a journal change on one key; say `done KEY`, or fail with `none KEY` when no row matched."""
    if not _opened(_config(**settings), lambda inbox: action(inbox, key)):
        raise click.ClickException(f"{none} {key!r}")
    if as_json:
        _echo({"key": key, "done": done}, as_json=True)
    else:
        click.echo(f"{done} {key}")


@command()
@db_options
@click.argument("key")
@_json
def requeue(*, key: str, as_json: bool, **settings: Any) -> None:
    """Make a dead or conflicting message processable again (its next delivery runs the handler)."""
    _change(_ops.requeue, key, settings, as_json=as_json, done="requeued", none="no dead or conflicting row")


@command()
@db_options
@click.argument("key")
@click.confirmation_option(prompt="Forget this key? Its next delivery will be processed again.", show_envvar=True)
@_json
def forget(*, key: str, as_json: bool, **settings: Any) -> None:
    """Delete a journal row on purpose, so that the next delivery of the key is processed again."""
    _change(_ops.forget, key, settings, as_json=as_json, done="forgot", none="no row")


@command()
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

    cfg = _config(**settings)
    done = _opened(cfg, lambda inbox: replay_stored(inbox, key, to=to or cfg.source))
    if as_json:
        _echo(done, as_json=True)
    else:
        _say(f"replayed {done['key']} as {done['message_id']} to {done['to']}")


@command()
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
    with click.progressbar(
        length=1, label=f"purging rows older than {duration_text(cfg.retention)}", file=sys.stderr
    ) as bar:
        shown = 0

        def progress(deleted: int, total: int) -> None:
            nonlocal shown
            bar.length = total
            bar.update(deleted - shown)
            shown = deleted

        purged = _opened(
            cfg,
            lambda inbox: _ops.purge(
                inbox, older_than=cfg.retention, max_rate=cfg.purge_max_rate, batch_size=batch_size, progress=progress
            ),
        )
    if as_json:
        _echo(
            {"purged": purged.rows, "rejected": purged.rejected, "older_than": duration_text(cfg.retention)},
            as_json=True,
        )
    else:
        age = duration_text(cfg.retention)
        click.echo(f"purged {purged.rows} rows and {purged.rejected} rejected payloads older than {age}")
