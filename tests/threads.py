"""Running a test's workers in threads of their own, to race them against each other."""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["in_threads"]


def in_threads(*workers: Callable[[], object], timeout: float = 60) -> None:
    """Run each of `workers` in a thread of its own, all started before any is waited for, then wait for each up
    to `timeout` seconds (the test's own assertions then say what a worker left undone)."""
    threads = [threading.Thread(target=worker) for worker in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
