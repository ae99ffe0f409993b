"""A daemon thread that runs blocking librdkafka calls one after another, for the Kafka source and publisher."""

from __future__ import annotations

import concurrent.futures
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["Daemon"]

T = TypeVar("T")


_Calls = queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]] | None]


class Daemon:
    """A daemon thread that runs blocking librdkafka calls one after another: never joined at exit, unlike a worker
    of `asyncio.to_thread`, so a call that waits for brokers that are down cannot hold the process. Started at the
    first call and kept (a thread started per commit cost about 115 us, more than the rest of an ack).

    Each thread has a queue of its own: a thread that `stop` ended may still be stuck in a call, so a call submitted
    after the stop goes to a new thread with a new queue, never behind the stuck call (sharing one queue, the new
    thread took the stop meant for the old one and the call waited for the stuck one, its caller with it). `submit`
    and `stop` may be called from any thread."""

    def __init__(self) -> None:
        """No thread yet."""
        self._lock = threading.Lock()
        self._calls: _Calls | None = None  # the queue of the running thread, None when there is none

    def submit(self, call: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Run `call` after the calls submitted before it; its future (cancelled before its turn, it does not run)."""
        done: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._lock:
            if self._calls is None:
                self._calls = queue.SimpleQueue()
                threading.Thread(target=_run, args=(self._calls,), name="edinbox-kafka", daemon=True).start()
            self._calls.put((call, done))
        return done

    def stop(self) -> None:
        """End the thread once the calls before have run (a call stuck in librdkafka keeps it, as a daemon)."""
        with self._lock:
            if self._calls is not None:
                self._calls.put(None)
                self._calls = None


def _run(calls: _Calls) -> None:
    """A daemon's thread: run the calls of its queue until the stop."""
    while (item := calls.get()) is not None:
        call, done = item
        if not done.set_running_or_notify_cancel():
            continue  # cancelled while it waited for its turn
        try:
            result = call()
        except BaseException as exc:  # handed to the waiting thread
            done.set_exception(exc)
        else:
            done.set_result(result)
