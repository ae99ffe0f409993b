"""The relay child's entry point, `python -m edinbox.hub.relay._child` (see `edinbox.hub.relay._process`): a module
of its own, which the package never imports, so that running it as `__main__` imports nothing twice."""

from __future__ import annotations

from edinbox.hub.relay._process import child

__all__: list[str] = []

if __name__ == "__main__":
    child()
