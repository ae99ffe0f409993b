"""How an `edinbox` command declares its options and gets its settings, so that every command behaves alike.

A command in `edinbox.cli` (which imports these helpers as `_option`, `_setting`, `_json`, `_run`, `_echo`,
`_errors`, and wraps `hub_settings` as `_config`) is declared like this:

    @main.command()
    @db_options                                   # --config, --db, --table, --consumer
    @_setting("--source")                         # a HubConfig field: help, [env var: EDINBOX_SOURCE; default: ...]
    @_option("--limit", default=50, type=int)     # the command's own option: EDINBOX_<COMMAND>_LIMIT
    @_json                                        # --json, on every command
    def list_(*, limit: int, as_json: bool, **settings: Any) -> None:
        cfg = _config(**settings)                 # checked before anything is touched (see below)
        _echo(_opened(cfg, lambda inbox: _ops.list_rows(inbox, ...)), as_json=as_json)

- `setting(flag)` declares a field of `HubConfig` (its description is the help, its default is shown); the value
  arrives unparsed in `**settings` and is typed by the model, with the TOML file and the `EDINBOX_` variables.
- `hub_settings(settings)` is the check before touching data: the settings (unknown keys, types, durations), the
  driver each URL needs (`needs psycopg: pip install 'edinbox[postgres]'`), and, unless `creates=True` (`init`),
  that the SQLite file and the spool folder exist: a read-only command never creates them. One line, exit 1.
- `run(coro)` runs a coroutine with edinbox errors as one masked line and exit 1; `opened(cfg, work)` runs
  `work(inbox)` so, on the one inbox the command opens (an operator function of `edinbox.hub.ops` works on the inbox
  it is given); `echo(data, as_json=...)` prints.

Text leaves a command at three boundaries, each redacted here once (`edinbox._redact`): what it prints (`echo` for
values, `say` for a sentence), its `Error:` line (`Commands`), and its log lines (`configure`, installed for every
command at WARNING, at INFO by `run` and `relay`). Each masks URL passwords and secret options by their shape, and
replaces the exact secrets of every URL the command was given (options, variables, the TOML file) in any spelling.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

import click
from click.core import ParameterSource

from edinbox._async_inbox import AsyncInbox
from edinbox._errors import ConfigurationError, InboxError
from edinbox._extras import require
from edinbox._redact import Secrets
from edinbox._urls import database_url
from edinbox.hub.config import HubConfig, Settings, duration_text, load_settings
from edinbox.hub.database import on_inbox
from edinbox.hub.ops import render

__all__ = [
    "EXIT_CONFIGURATION",
    "MAX_ROWS",
    "Commands",
    "Number",
    "command",
    "db_options",
    "echo",
    "errors",
    "hub_config",
    "hub_settings",
    "json_option",
    "log_format",
    "opened",
    "option",
    "run",
    "say",
    "secrets",
    "setting",
]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

EXIT_CONFIGURATION = 1
"""A setting, flag, URL or the schema is wrong (click's usage errors included): fix it, then start again."""


class _UsageError(click.UsageError):
    """A bad flag or value: a configuration error like any other (exit 1; 2 means a hub gave up)."""

    exit_code = EXIT_CONFIGURATION


def secrets() -> Secrets:
    """The secrets this command knows (one per command line, kept by its root context)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return Secrets()
    return cast(Secrets, ctx.find_root().meta.setdefault("edinbox.secrets", Secrets()))


class _Command(click.Command):
    """A command that knows the secrets of the URLs it was given before it runs, and logs its drivers' warnings
    redacted."""

    def invoke(self, ctx: click.Context) -> Any:
        """Learn the secrets of every option's value, install the log boundary at WARNING, run the command."""
        from edinbox.hub.config import configure

        known = secrets()
        known.learn(v for value in ctx.params.values() for v in (value if isinstance(value, tuple) else (value,)))
        configure([], level=logging.WARNING, known=known)
        return super().invoke(ctx)


class Number(click.FloatRange):
    """A number within bounds, NaN refused (it compares false with both bounds, so click's FloatRange takes it)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The number, or a usage error naming the range."""
        number = super().convert(value, param, ctx)
        if math.isnan(number):
            self.fail(f"{value!r} is not a number in the range {self._describe_range()}.", param, ctx)
        return number


class Commands(click.Group):
    """The command group: a command's usage errors exit 1, as configuration errors; every `Error:` line redacted."""

    command_class = _Command

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; its usage errors keep their message and usage line, with exit status 1."""
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            clean = secrets().text(exc.message)
            if isinstance(exc, _UsageError) and clean == exc.message:
                raise
            raise _UsageError(clean, exc.ctx) from exc
        except click.ClickException as exc:
            clean = secrets().text(exc.message)
            if clean == exc.message:
                raise
            raise click.ClickException(clean) from exc


@contextlib.contextmanager
def errors() -> Iterator[None]:
    """edinbox errors become a one-line message (passwords masked) and exit status 1."""
    try:
        yield
    except InboxError as exc:  # a driver's message may span lines (psycopg: "...refused\n\tIs the server running")
        line = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
        raise click.ClickException(secrets().text(line)) from exc


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine, its edinbox errors reported as by `errors`."""
    with errors():
        return asyncio.run(coro)


def opened(config: HubConfig, work: Callable[[AsyncInbox], Awaitable[T]]) -> T:
    """Run `work(inbox)` on the one inbox of `config`'s journal this command opens (closed after), as `run` does."""
    return run(on_inbox(config, work))


def option(*decls: str, **kwargs: Any) -> Callable[[F], F]:
    """An option whose environment variable `--help` shows (EDINBOX_<COMMAND>_<OPTION> unless named)."""
    return click.option(*decls, show_envvar=True, **kwargs)


class _Setting(click.Option):
    """An option for a HubConfig field: unset unless given, its `[default: ...]` the model's default."""

    def __init__(self, *args: Any, shown_default: str, **kwargs: Any) -> None:
        """Keep the default to show; the value itself stays None unless given."""
        super().__init__(*args, **kwargs)
        self.shown_default = shown_default

    def get_help_extra(self, ctx: click.Context) -> Any:
        """Click's help extras, the default taken from the settings model."""
        extra = super().get_help_extra(ctx)
        extra["default"] = self.shown_default
        return extra


_METAVARS = {
    "whole_number": "N",
    "seconds": "SECONDS",
    "duration": "DURATION",
    "lease_duration": "DURATION",
    "optional_duration": "DURATION",
    "period": "DURATION",
    "rows_per_second": "ROWS/S",
}


def _default_text(default: object) -> str:
    """A setting's default as `--help` shows it: a duration as the flag takes it (`15s`, `7d`), none as `none`."""
    if isinstance(default, timedelta):
        return duration_text(default)
    return "none" if default in ("", None) else str(default)


def setting(flag: str, name: str | None = None, *, help: str | None = None, **kwargs: Any) -> Callable[[F], F]:
    """A field of HubConfig as a flag: its variable EDINBOX_<FIELD>, its help and default from the model."""
    field = name or flag.removeprefix("--").replace("-", "_")
    info = HubConfig.model_fields[field]
    default = info.get_default(call_default_factory=True)
    validators = [getattr(getattr(m, "func", None), "__name__", "") for m in info.metadata]
    metavar = next((_METAVARS[v] for v in validators if v in _METAVARS), "TEXT")
    return option(
        flag,
        field,
        cls=_Setting,
        envvar=f"EDINBOX_{field.upper()}",
        default=None,
        metavar=metavar,
        shown_default=_default_text(default),
        help=help or info.description,
        **kwargs,
    )


json_option = option("--json", "as_json", is_flag=True, envvar="EDINBOX_JSON", help="print JSON")
"""`--json`: every command prints JSON with it (one object, or one list of rows)."""


def db_options(func: F) -> F:
    """The options every command shares: --config, --db, --table, --consumer (and their EDINBOX_ variables)."""
    config = option(
        "--config",
        type=click.Path(dir_okay=False, path_type=Path),
        envvar="EDINBOX_CONFIG",
        help="a hub.toml (`edinbox config --example` prints one)",
    )
    for decorator in reversed([config, setting("--db"), setting("--table"), setting("--consumer")]):
        func = decorator(func)
    return func


def load(settings: Mapping[str, Any]) -> Settings:
    """The effective settings: the --config file, the EDINBOX_ variables, then the flags given on the command line."""
    ctx = click.get_current_context()
    given = {
        name: value
        for name, value in settings.items()
        if name != "config" and ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE
    }
    names = {p.name: p.opts[0] for p in ctx.command.params if p.name}
    with errors():
        loaded = load_settings(settings.get("config"), given, names=names)
    secrets().learn(_texts(loaded.config.model_dump()))
    return loaded


def _texts(value: Any) -> Iterator[str]:
    """Every text in a settings dump (the partners' tables included)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _texts(item)


def hub_settings(settings: Mapping[str, Any], *, creates: bool = False) -> HubConfig:
    """The checked settings of this command: see the module's docstring. `creates`: this command may create the
    database and the spool folder (only `init`)."""
    declared = {p.name for p in click.get_current_context().command.params}
    cfg = load(settings).config
    with errors():
        require(cfg.db)
        if "accounting" in declared and cfg.accounting:
            require(cfg.accounting)
        if "source" in declared and cfg.source:
            from edinbox.sources import check_source

            check_source(cfg.source, exists=not creates)
        if not creates:
            _database_exists(cfg.db)
    return cfg


def _database_exists(db: str) -> None:
    """Refuse a SQLite file that does not exist: only `edinbox init` creates one."""
    url = database_url(db)
    if url.dialect == "sqlite" and not url.in_memory and not os.path.isfile(url.target):
        raise ConfigurationError(f"no database {url.target}: `edinbox init --db {db}` creates it")


def echo(data: Mapping[str, Any] | Sequence[Mapping[str, Any]], *, as_json: bool, columns: Sequence[str] = ()) -> None:
    """Print a value as JSON (`--json`) or as people read it (a table for rows), every text in it redacted."""
    text = render(secrets().data(data), as_json=as_json, columns=columns)
    if text:
        click.echo(text)


def say(text: str, *, err: bool = False) -> None:
    """Print a sentence (to stderr with `err`), redacted."""
    click.echo(secrets().text(text), err=err)


def command(name: str | None = None) -> Callable[[Callable[..., Any]], click.Command]:
    """Declare an `edinbox` command: before it runs, it learns the secrets of its options' values and logs its
    drivers' warnings redacted (every command of `edinbox.cli.main` is declared so)."""
    return click.command(name, cls=_Command)


def hub_config(**settings: Any) -> HubConfig:
    """The checked settings of a command (`**settings` as its options gave them): see `hub_settings`."""
    return hub_settings(settings)


MAX_ROWS = 100_000
"""The most rows one `list`, `purge` batch or relay pass may ask for."""

log_format = option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    envvar="EDINBOX_LOG_FORMAT",
    help="each log line logfmt (text) or one JSON object (json)",
)
"""The `--log-format` option of the commands that run (`run`, `relay`)."""
