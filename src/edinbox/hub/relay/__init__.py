"""The relay beside a hub: the outbox's rows sent to partners, in the hub's process or in a child
process of its own (`python -m edinbox.hub.relay._child`, which this package never imports).
"""

from edinbox.hub.relay._process import RelayProcess, apart
from edinbox.hub.relay._relay import beside

__all__ = ["RelayProcess", "apart", "beside"]
