"""How a long-running command stops: the first SIGTERM or Ctrl-C asks for a graceful stop, a second one exits at once.

`edinbox run`, `edinbox relay` and `edinbox console` share it, so each stops alike: the first signal sets the event
the command's loop watches (the batch or request in hand is finished, a wait for a dependency ends at once); the
second exits at once with status 128 + its number (143 for SIGTERM, 130 for Ctrl-C), as a SIGKILL would, without
waiting for anything. Nothing unacknowledged is lost: the broker or the spool delivers it again.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

from edinbox._logs import log_event

__all__ = ["stop_on_signals"]


def stop_on_signals(logger: str = "edinbox.hub") -> asyncio.Event:
    """An event the first SIGTERM or SIGINT sets (its line logged to `logger`); a second one ends the process at once
    with status 128 + its number. Call it with the event loop running, in the main thread."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def signalled(sig: signal.Signals) -> None:
        if stop.is_set():
            sys.stderr.write(f"{sig.name} again: stopping at once\n")
            sys.stderr.flush()
            os._exit(128 + sig)
        fields = {"signal": sig.name, "then": "a second one stops at once"}
        log_event(logging.getLogger(logger), logging.INFO, "stopping", fields)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, signalled, sig)
    return stop
