"""What the hub does with deliveries: each planned into EDI items before any transaction, a batch
settled through the inbox in one commit, traced, and acked after it (`Hub`, `open_hub`).
"""

from edinbox.hub.deliveries._hub import Hub, open_hub
from edinbox.hub.deliveries._items import HEAD

__all__ = ["HEAD", "Hub", "open_hub"]
