"""The `edinbox` command: the EDI hub and the operator's commands."""

from __future__ import annotations

import click

__all__ = ["main"]


@click.group(context_settings={"auto_envvar_prefix": "EDINBOX", "help_option_names": ["-h", "--help"]})
def main() -> None:
    """edinbox: each partner interchange creates its invoice once, however often the broker redelivers."""


@main.command()
def demo() -> None:
    """Run the hub on generated partner interchanges (SQLite and a spool folder, no server)."""
    click.echo("edinbox demo: the hub is not built yet")
