"""A daemon thread that runs blocking librdkafka calls one after another, for the Kafka source and publisher."""

from __future__ import annotations

import concurrent.futures
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["Daemon"]

T = TypeVar("T")


class Daemon:
    """A daemon thread that runs blocking librdkafka calls one after another: never joined at exit, unlike a worker
    of `asyncio.to_thread`, so a call that waits for brokers that are down cannot hold the process. Started at the
    first call and kept (a thread started per commit cost about 115 us, more than the rest of an ack)."""

    def __init__(self) -> None:
        """No thread yet."""
        self._calls: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]] | None]
        self._calls = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, call: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Run `call` after the calls submitted before it; its future (cancelled before its turn, it does not run)."""
        done: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._calls.put((call, done))
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="edinbox-kafka", daemon=True)
            self._thread.start()
        return done

    def stop(self) -> None:
        """End the thread once the calls before have run (a call stuck in librdkafka keeps it, as a daemon)."""
        if self._thread is not None:
            self._calls.put(None)
            self._thread = None

    def _run(self) -> None:
        while (item := self._calls.get()) is not None:
            call, done = item
            if not done.set_running_or_notify_cancel():
                continue  # cancelled while it waited for its turn
            try:
                result = call()
            except BaseException as exc:  # handed to the waiting thread
                done.set_exception(exc)
            else:
                done.set_result(result)
