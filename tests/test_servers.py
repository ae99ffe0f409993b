"""The private servers' helpers: what they do when the machine cannot give them what they need."""

from __future__ import annotations

import socket

import pytest

from servers import _low_free_port


def test_low_free_port_gives_up_with_the_range_it_searched() -> None:
    """With every port of its range taken, _low_free_port raises a RuntimeError naming the range after its tries,
    instead of looking forever; one port free in the range is found."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError, match=rf"no free port on 127.0.0.1 from {port} to {port} after 5 random"):
            _low_free_port(port, port, tries=5)
    assert _low_free_port(port, port, tries=5) == port
