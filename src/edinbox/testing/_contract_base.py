"""What the contract suites share: the test partner's messages, the failures they raise, the harness protocols."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, Protocol

from edinbox._errors import PermanentError
from edinbox._message import Message, Outcome

SOURCE = "X12:ZZ:ACME>ZZ:HUB"


class Boom(Exception):
    """A handler failure."""


class Unreadable(PermanentError):
    """The user's own permanent failure."""


def msg(message_id: str, payload: bytes = b"payload", source: str = SOURCE) -> Message:
    """A message of the test partner."""
    return Message(message_id, source, payload)


class StoreHarness(Protocol):
    """One synchronous face over an inbox of the store under test (sync or async API), with a business table for
    the handler's effects: each handler run writes one effect row per message it gets, in the inbox transaction."""

    table: str
    """The journal table's name, as admin SQL writes it."""
    seen: list[list[str]]
    """The message ids handed to each handler call, in order."""

    def process(self, message: Message, *, fail: BaseException | None = None, **options: Any) -> Outcome:
        """Process one message with the effect handler, which raises `fail` (after writing) when given."""

    def process_batch(
        self, messages: list[Message], *, fail: BaseException | None = None, isolate: bool = False
    ) -> list[Outcome | Exception]:
        """Process a batch with the effect handler."""

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Call an inbox method by name (awaited on the async API): `get`, `records`, `requeue`..."""

    def admin(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run SQL outside the inbox (committed at once) and return its rows."""

    def effects(self, message_id: str | None = None) -> int:
        """Committed effect rows, of one message or all."""


HarnessFactory = Callable[..., StoreHarness]
"""`store_harness(max_attempts=..., retry=...)`: a fresh harness on an empty journal."""


class Crash(BaseException):
    """A process dying mid-handler (not an Exception: the inbox records nothing for it)."""


def lease(seconds: float) -> timedelta:
    """A lease of `seconds`."""
    return timedelta(seconds=seconds)


class InboxHarness(StoreHarness, Protocol):
    """A `StoreHarness` with what the full inbox contract needs besides: handlers to pass to the inbox's own methods,
    the inbox itself, and a few admin operations on the journal."""

    asynchronous: bool
    """Whether `inbox` is an AsyncInbox (its methods awaited by `call`)."""
    inbox: Any
    """The Inbox or AsyncInbox under test."""
    keys: list[str | None]
    """The idempotency keys lease-mode handlers saw (`tx.idempotency_key`), in order."""

    def handler(
        self,
        *,
        fail: BaseException | None = None,
        effect: bool = True,
        poison: str | None = None,
        failures: dict[str, BaseException] | None = None,
    ) -> Any:
        """The effect handler (sync or async, as `inbox` wants) for `call("process", ...)`: it writes one effect row
        per message (unless `effect=False`), then raises `fail` (only for message `poison` when given) or the
        exception `failures` names for the first of its messages found there; it appends the ids it got to `seen`
        and, in lease mode, `tx.idempotency_key` to `keys`."""

    def process_batch(
        self,
        messages: list[Message],
        *,
        fail: BaseException | None = None,
        poison: str | None = None,
        isolate: bool = False,
    ) -> list[Outcome | Exception]:
        """Process a batch with the effect handler, which fails only on message `poison` when given."""

    def completion(self, message: Message) -> Any:
        """An `on_complete` that writes `message`'s effect row in the transaction that commits its completion."""

    def reopen(self, **options: Any) -> None:
        """Close the inbox and open another on the same journal with `options` (`consumer=`, `max_attempts=`...)."""

    def set_version(self, version: int) -> None:
        """Overwrite the journal's stored schema version."""

    def backdate(self, seconds: float) -> None:
        """Move every settled row's `settled_at` `seconds` into the past."""


InboxHarnessFactory = Callable[..., InboxHarness]
"""`store_harness(consumer=..., max_attempts=..., horizon=...)`: a fresh harness on an empty journal."""
