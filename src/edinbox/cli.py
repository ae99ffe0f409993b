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
