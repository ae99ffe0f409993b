"""What the hub does with deliveries: each planned into EDI items before any transaction, a batch
settled through the inbox in one commit, traced, and acked after it (`Hub`, `open_hub`).
"""

from edinbox.hub.deliveries._hub import Hub
from edinbox.hub.deliveries._items import HEAD
from edinbox.hub.deliveries._open import open_hub

__all__ = ["HEAD", "Hub", "open_hub"]
