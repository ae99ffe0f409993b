"""The relay child's entry point, `python -m edinbox.hub._relay_child` (see `edinbox.hub._relay_process`): a module
of its own, which the package never imports, so that running it as `__main__` imports nothing twice."""

from __future__ import annotations

from edinbox.hub._relay_process import child

__all__: list[str] = []

if __name__ == "__main__":
    child()
