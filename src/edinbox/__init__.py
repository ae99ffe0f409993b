"""edinbox: make a business side effect happen exactly once on top of brokers that deliver at least once."""

from edinbox._application import Application
from edinbox._async_inbox import AsyncInbox
from edinbox._async_transaction import AsyncTransaction
from edinbox._core import Status
from edinbox._errors import (
    ConfigurationError,
    DataError,
    InboxError,
    LimitError,
    NotSettledError,
    PermanentError,
    RetryLater,
    SchemaError,
    SourceError,
    StoreError,
    TransientError,
)
from edinbox._message import Message, Outcome, Outgoing
from edinbox._payloads import Hit, Kept
from edinbox._records import Record, Stats, Tx
from edinbox._retry import Retry
from edinbox._sync_inbox import Inbox
from edinbox._sync_transaction import Transaction
from edinbox.loop import AsyncConsumer, consume

__all__ = [
    "Application",
    "AsyncConsumer",
    "AsyncInbox",
    "AsyncTransaction",
    "ConfigurationError",
    "DataError",
    "Hit",
    "Inbox",
    "InboxError",
    "Kept",
    "LimitError",
    "Message",
    "NotSettledError",
    "Outcome",
    "Outgoing",
    "PermanentError",
    "Record",
    "Retry",
    "RetryLater",
    "SchemaError",
    "SourceError",
    "Stats",
    "Status",
    "StoreError",
    "Transaction",
    "TransientError",
    "Tx",
    "consume",
]
