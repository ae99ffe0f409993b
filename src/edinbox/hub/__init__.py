"""The EDI hub: deliveries from a source, through the inbox, into accounting, acked after the commit.

`open_hub(config)` assembles the parts a `HubConfig` names; `Hub.run()` settles deliveries until stopped (or, with
`once=True`, until the source is idle), waiting out outages of its database and source; `open_hub(stop=event)`
raises Stopped when the event is set while it waits for them at start. Invoices go to an `Accounting` sink:
`SqlAccounting` (a table in the journal's transaction) by default.
"""

from edinbox.hub._accounting import Accounting, Created, SqlAccounting
from edinbox.hub._config import DEFAULT_ROUTES, HubConfig, parse_duration
from edinbox.hub._fault import FaultPoint, parse_fault
from edinbox.hub._hub import Hub, open_hub
from edinbox.hub._settings import load_config
from edinbox.hub._values import duration_text
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
