"""`edinbox console`: the operator's web console, bound to loopback unless a token and TLS say otherwise."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from edinbox.cli._commands import command, db_options
from edinbox.cli._commands import echo as _echo
from edinbox.cli._commands import errors as _errors
from edinbox.cli._commands import hub_config as _config
from edinbox.cli._commands import json_option as _json
from edinbox.cli._commands import option as _option

__all__ = ["console"]


@command()
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
    from edinbox.console import check_bind, check_extra, check_tls, check_token, serve

    with _errors():
        check_extra()  # before it prints where it would listen
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
