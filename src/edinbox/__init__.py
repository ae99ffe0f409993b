"""edinbox: make a business side effect happen exactly once on top of brokers that deliver at least once."""

from edinbox._errors import (
    ConfigurationError,
    InboxError,
    NotSettledError,
    SchemaError,
    SourceError,
    StoreError,
)
from edinbox._message import Message, Outcome

__all__ = [
    "ConfigurationError",
    "InboxError",
    "Message",
    "NotSettledError",
    "Outcome",
    "SchemaError",
    "SourceError",
    "StoreError",
]
