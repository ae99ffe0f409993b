"""Which addresses a listener may bind without exposing itself: loopback only, unless the operator says otherwise."""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether `host` is `localhost` or a loopback address (127.0.0.0/8, ::1); "", 0.0.0.0, :: and names are not."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
