"""The exception tree of edinbox.

    InboxError
    ├── ConfigurationError (also ValueError)   bad URL, bad identifier, retention shorter than the horizon
    ├── SchemaError                            missing table, unique key or wrong schema version
    ├── StoreError                             the database failed or is unreachable (driver error mapped)
    ├── NotSettledError                        a live lease is held elsewhere: do not ack, let the broker retry
    └── SourceError                            a broker connection or protocol failure

A duplicate is an outcome, not an exception, and the user's handler exceptions pass through unchanged.
The EDI parser has its own error, `edinbox.edi.EdiSyntaxError`, rooted here too.
"""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "InboxError",
    "NotSettledError",
    "SchemaError",
    "SourceError",
    "StoreError",
]


class InboxError(Exception):
    """Base of every error edinbox raises."""


class ConfigurationError(InboxError, ValueError):
    """The inbox or hub was configured with a value that cannot work."""


class SchemaError(InboxError):
    """The journal table is missing, lacks its unique key, or has another schema version."""


class StoreError(InboxError):
    """The database failed or could not be reached; the message is not settled."""


class NotSettledError(InboxError):
    """The message is being processed elsewhere under a live lease; the caller must not ack it."""


class SourceError(InboxError):
    """A broker or spool source failed; the delivery is not acked."""
