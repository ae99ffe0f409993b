"""The `edinbox` command: the EDI hub and the operator's commands.

Every setting is a flag, an `EDINBOX_` environment variable (shown in `--help`) or a key of the TOML file given
with `--config`; flags win over the environment, which wins over the file. Only this package reads the environment.
How a command declares its options, and the checks it runs before touching data: `edinbox.cli._commands`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from edinbox.cli._commands import Commands, command, db_options, load
from edinbox.cli._commands import echo as _echo
from edinbox.cli._commands import errors as _errors
from edinbox.cli._commands import json_option as _json
from edinbox.cli._commands import option as _option
from edinbox.cli._commands import run as _run
from edinbox.cli._commands import say as _say
from edinbox.cli._commands import setting as _setting
from edinbox.cli._console import console
from edinbox.cli._journal import doctor, forget, init, list_, migrate, purge, replay, requeue, show, stats
from edinbox.cli._ledger import ledger
from edinbox.cli._proofs import chaos, demo
from edinbox.cli._run import relay, run
from edinbox.cli._store import export, search

__all__ = ["main"]


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


@command()
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


@command("config")
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


for _command in (
    chaos,
    config_,
    console,
    demo,
    doctor,
    export,
    forget,
    init,
    ledger,
    list_,
    migrate,
    publish,
    purge,
    relay,
    replay,
    requeue,
    run,
    search,
    show,
    stats,
):
    main.add_command(_command)
