"""How a hub is set up: its one typed configuration (`HubConfig`, checked without I/O), where each
setting came from (the TOML file, `EDINBOX_` variables, flags), the fault points, and the process's logging.
"""

from edinbox.hub.config._fault import FaultPoint, parse_fault
from edinbox.hub.config._log import LOGGER, configure, log_event, rendering_json, settled
from edinbox.hub.config._model import (
    BYPASS,
    DEFAULT_ROUTES,
    INBOX,
    LEVELS,
    Agreement,
    HubConfig,
    give_up_after,
    parse_duration,
)
from edinbox.hub.config._settings import Settings, example_toml, load_config, load_settings

__all__ = [
    "BYPASS",
    "DEFAULT_ROUTES",
    "INBOX",
    "LEVELS",
    "LOGGER",
    "Agreement",
    "FaultPoint",
    "HubConfig",
    "Settings",
    "configure",
    "example_toml",
    "give_up_after",
    "load_config",
    "load_settings",
    "log_event",
    "parse_duration",
    "parse_fault",
    "rendering_json",
    "settled",
]
