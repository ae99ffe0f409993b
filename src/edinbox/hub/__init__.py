"""The EDI hub: deliveries from a source, through the inbox, into accounting, acked after the commit.

`open_hub(config)` assembles the parts a `HubConfig` names; `Hub.run()` settles deliveries until stopped (or, with
`once=True`, until the source is idle), waiting out outages of its database and source; `open_hub(stop=event)`
raises Stopped when the event is set while it waits for them at start. Invoices go to an `Accounting` sink:
`SqlAccounting` (a table in the journal's transaction) by default.
"""

from edinbox.hub.config import (
    DEFAULT_ROUTES,
    FaultPoint,
    HubConfig,
    duration_text,
    load_config,
    parse_duration,
    parse_fault,
)
from edinbox.hub.deliveries import Hub, open_hub
from edinbox.hub.sinks import Accounting, Created, SqlAccounting
from edinbox.loop import Stopped

__all__ = [
    "DEFAULT_ROUTES",
    "Accounting",
    "Created",
    "FaultPoint",
    "Hub",
    "HubConfig",
    "SqlAccounting",
    "Stopped",
    "duration_text",
    "load_config",
    "open_hub",
    "parse_duration",
    "parse_fault",
]
