"""What a handler may call on the inbox transaction it is given, as a type (an `AsyncInbox`'s handlers)."""
# sync-doc: What a handler may call on the inbox transaction it is given, as a type (an `Inbox`'s handlers).

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Protocol

from edinbox.stores._async_base import AsyncUnit

__all__ = ["AsyncTransaction"]


class AsyncTransaction(Protocol):
    """The inbox transaction a handler works in: an `edinbox.Tx` seen through what a handler may call on it.

    Annotate a handler's or a `transaction()` / `read()` work function's `tx` with it to have the type checker see
    the statements it runs: `unit.fetch` returns rows, `unit.run` and `publish` a row count. In lease mode the handler
    runs outside any transaction: it reads `idempotency_key` only (`unit` is None, `publish` raises).
    """

    @property
    def connection(self) -> Any:
        """The driver's own connection inside the transaction (psycopg's, or the MariaDB or SQLite driver's)."""

    @property
    def dialect(self) -> str:
        """The store's dialect: "postgresql", "mysql" (MariaDB and MySQL) or "sqlite"."""

    @property
    def idempotency_key(self) -> str | None:
        """Lease mode: the stable key to pass on to the non-transactional effect; None otherwise."""

    @property
    def unit(self) -> AsyncUnit:
        """Runs the store's named statements (`sql/<dialect>/*.sql`) in this same transaction."""

    def publish(
        self, destination: str, payload: bytes, *, key: str, headers: Mapping[str, str] | None = None
    ) -> Awaitable[int]:
        """Store a message for `destination` in the outbox, inside this transaction (sent once it commits)."""

    def publish_many(self, messages: Sequence[tuple[str, bytes, str]]) -> Awaitable[int]:
        """Store several messages `(destination, payload, key)` in the outbox, inside this transaction."""
