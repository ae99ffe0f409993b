"""What `edinbox publish` sends: files split into interchanges, each keyed by its interchange key as a producer id.

The producer id is `<source>/<message_id>` of `Interchange.message()` (for example `X12:ZZ:ACME>ZZ:HUB/000000905`),
the same string the hub logs as the key, so a broker's own id field (AMQP `message_id`, `Nats-Msg-Id`, the stream
entry's `message_id`) names the interchange the way a partner's tool would. An interchange without its trailer
has no key: it is sent under `<file name>@<byte offset>` so the hub parks it where operators see it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from edinbox import edi
from edinbox._errors import ConfigurationError
from edinbox._message import Message

__all__ = ["interchange_id", "send", "split_files", "split_payload"]


def interchange_id(message: Message) -> str:
    """The producer id of an interchange: its inbox key `(source, message_id)` as `source/message_id`."""
    return f"{message.source}/{message.message_id}"


async def send(url: str, messages: list[tuple[str, bytes]]) -> None:
    """Publish `(producer id, payload)` pairs to the broker or spool `url` names (`edinbox publish`, `replay`)."""
    from edinbox.sources import publisher

    await publisher(url)(url, messages)


def split_files(
    paths: Iterable[Path], *, raw: bool = False, warn: Callable[[str], None] | None = None
) -> list[tuple[str, bytes]]:
    """Read every file and return `(producer id, payload)` per interchange; a file that does not parse is an error.

    With `raw` each file is one message keyed by its file name. `warn` is
    told of each interchange without its trailer: it goes out under `<file name>@<offset>`, and the hub parks it.
    """
    messages: list[tuple[str, bytes]] = []
    for path in paths:
        found = split_payload(Path(path).read_bytes(), name=Path(path).name, raw=raw)
        if warn is not None and not raw:
            for key, _ in found:
                if key.startswith(f"{Path(path).name}@"):
                    warn(f"{key}: an interchange without its trailer has no key; it is sent under this name")
        messages.extend(found)
    return messages


def split_payload(data: bytes, *, name: str, raw: bool = False) -> list[tuple[str, bytes]]:
    """The `(producer id, payload)` of every interchange in `data` (a file called `name`)."""
    if raw:
        return [(name, data)]
    try:
        interchanges = edi.parse(data)
    except edi.EdiSyntaxError as exc:
        raise ConfigurationError(f"{name}: not valid EDI, nothing was published: {exc}") from None
    if not interchanges:
        raise ConfigurationError(f"{name}: no EDI interchange in the file, nothing was published")
    messages = []
    for interchange in interchanges:
        start, end = interchange.span
        if interchange.keyable:
            messages.append((interchange_id(interchange.message()), data[start:end]))
        else:
            messages.append((f"{name}@{start}", data[start:end]))
    return messages
