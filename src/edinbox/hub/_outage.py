"""Waiting out a dependency that is down: the library's `Outage` (`edinbox.loop`), which the hub, its relay, its
purge and the operator commands use."""

from edinbox.loop import Outage, Stopped, dependency, unless_stopped

__all__ = ["Outage", "Stopped", "dependency", "unless_stopped"]
