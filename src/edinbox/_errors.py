"""The exception tree of edinbox, and who pays for each failure.

    InboxError
    ├── ConfigurationError (also ValueError)   bad URL, option, identifier or setting: the process exits (code 1)
    ├── SchemaError                            missing table, unique key or wrong schema version: run `edinbox init`
    ├── PermanentError                         this one message can never succeed as it is: park it at once, alone,
    │   │                                      with its reason; no retry, no attempt counted for its batch-mates
    │   ├── DataError                          a value the store cannot hold (numeric overflow, value too long,
    │   │                                      invalid encoding, index row too large)
    │   └── LimitError (also ValueError)       a key or payload over the documented limits
    └── TransientError                         the database, broker or network failed: nothing is charged, the
        │                                      message stays unsettled (not acked) and the caller backs off
        ├── StoreError                         the database failed or is unreachable (driver error mapped)
        ├── NotSettledError                    a live lease is held elsewhere: do not ack, let the broker retry
        │   └── RetryLater                     the message waits for its retry time (`retry_at`, `delay`): hand
        │                                      the delivery back to come again then; nothing ran, nothing counted
        └── SourceError                        a broker connection or protocol failure

Only a handler's own exception (anything outside this tree) counts an attempt toward `max_attempts`; it passes
through unchanged. A duplicate is an outcome, not an exception.

Every message of this tree is masked where the error is made (`edinbox._urls.mask`: URL passwords, secret options),
so no caller, log or page that prints one shows a password.
"""

from __future__ import annotations

from datetime import datetime, timedelta

__all__ = [
    "ConfigurationError",
    "DataError",
    "InboxError",
    "LimitError",
    "NotSettledError",
    "PermanentError",
    "RetryLater",
    "SchemaError",
    "SourceError",
    "StoreError",
    "TransientError",
]


class InboxError(Exception):
    """Base of every error edinbox raises."""

    def __init__(self, *args: object) -> None:
        """Keep the arguments, every text among them with its passwords masked."""
        from edinbox._urls import mask  # _urls raises ConfigurationError: imported when the first error is made

        super().__init__(*(mask(arg) if isinstance(arg, str) else arg for arg in args))


class ConfigurationError(InboxError, ValueError):
    """The inbox or hub was configured with a value that cannot work."""


class SchemaError(InboxError):
    """The journal table is missing, lacks its unique key, or has another schema version."""


class PermanentError(InboxError):
    """This message alone can never succeed as it is: it is parked at once with this reason, never retried."""


class DataError(PermanentError):
    """The store cannot hold a value of this message (overflow, too long, bad encoding, index row too large)."""


class LimitError(PermanentError, ValueError):
    """A key or payload is over the documented limits."""


class TransientError(InboxError):
    """A dependency failed for now: nothing is charged, the message stays unsettled and is retried later."""


class StoreError(TransientError):
    """The database failed or could not be reached; the message is not settled."""


class NotSettledError(TransientError):
    """The message is being processed elsewhere under a live lease; the caller must not ack it."""


class SourceError(TransientError):
    """A broker or spool source failed; the delivery is not acked."""


class RetryLater(NotSettledError):
    """The message failed before and waits for its retry time: nothing ran and no attempt was counted.

    The caller must not ack; it hands the delivery back to come again after `delay` (NATS: nak with that delay;
    elsewhere the consumer holds it until then). `retry_at` is the journal's time, `delay` how long is left.
    """

    def __init__(self, text: str, *, retry_at: datetime, delay: timedelta) -> None:
        """Say why, with when the message may run again and how long that is from now."""
        super().__init__(text)
        self.retry_at = retry_at
        self.delay = delay

    def __reduce__(self) -> tuple[object, ...]:
        """Pickle with the keyword arguments (a process pool's worker raises it across processes)."""
        return (_retry_later, (str(self), self.retry_at, self.delay))


def _retry_later(text: str, retry_at: datetime, delay: timedelta) -> RetryLater:
    return RetryLater(text, retry_at=retry_at, delay=delay)
