"""edinbox: make a business side effect happen exactly once on top of brokers that deliver at least once."""

from edinbox._async_inbox import AsyncInbox
from edinbox._core import Status
from edinbox._errors import (
    ConfigurationError,
    InboxError,
    NotSettledError,
    SchemaError,
    SourceError,
    StoreError,
)
from edinbox._message import Message, Outcome
from edinbox._records import Record, Stats, Tx
from edinbox._sync_inbox import Inbox

__all__ = [
    "AsyncInbox",
    "ConfigurationError",
    "Inbox",
    "InboxError",
    "Message",
    "NotSettledError",
    "Outcome",
    "Record",
    "SchemaError",
    "SourceError",
    "Stats",
    "Status",
    "StoreError",
    "Tx",
]
