"""How a hub is set up: its one typed configuration (`HubConfig`, checked without I/O), where each
setting came from (the TOML file, `EDINBOX_` variables, flags), the fault points, and the process's logging.
"""

from edinbox.hub.config._fault import FaultPoint, parse_fault
from edinbox.hub.config._log import LOGGER, configure, log_event, rendering_json, settled
from edinbox.hub.config._model import DEFAULT_ROUTES, Agreement, HubConfig, Route, parse_duration
from edinbox.hub.config._settings import Settings, example_toml, load_config, load_settings
from edinbox.hub.config._terms import LEVELS, levels
from edinbox.hub.config._values import duration_text

__all__ = [
    "DEFAULT_ROUTES",
    "LEVELS",
    "LOGGER",
    "Agreement",
    "FaultPoint",
    "HubConfig",
    "Route",
    "Settings",
    "configure",
    "duration_text",
    "example_toml",
    "levels",
    "load_config",
    "load_settings",
    "log_event",
    "parse_duration",
    "parse_fault",
    "rendering_json",
    "settled",
]
