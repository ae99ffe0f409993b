"""The daemon thread of the Kafka source's and publisher's blocking calls (no broker): a call submitted after a stop
runs on a new thread at once, never behind a call the stopped thread is stuck in, and nothing submitted is lost."""

from __future__ import annotations

import threading

from edinbox.sources._kafka_daemon import Daemon


def test_a_call_submitted_after_stop_does_not_wait_for_the_call_the_stopped_thread_is_stuck_in() -> None:
    """A call stuck in the daemon's thread (librdkafka waiting for brokers that are down), then `stop`, then a new
    call: the new call runs at once on a thread of its own (it did not wait behind the stuck call while the new
    thread took the stop meant for the old one), and the stuck call still completes once released."""
    daemon = Daemon()
    started, release = threading.Event(), threading.Event()

    def stuck() -> threading.Thread:
        started.set()
        release.wait(60)
        return threading.current_thread()

    first = daemon.submit(stuck)
    assert started.wait(10)
    daemon.stop()
    second = daemon.submit(threading.current_thread)
    try:
        ran_on = second.result(timeout=10)  # a guard: it runs at once, or waits for `release` (60 s) before the fix
    finally:
        release.set()
    assert first.result(timeout=10) is not ran_on
    daemon.stop()


def test_calls_submitted_before_a_stop_all_run_in_order() -> None:
    """Calls submitted behind a running one, then `stop`: every call runs, in the order submitted, before the
    thread ends."""
    daemon = Daemon()
    release = threading.Event()
    order: list[int] = []
    futures = [daemon.submit(lambda: release.wait(60))]
    futures += [daemon.submit(lambda n=n: order.append(n)) for n in range(5)]
    daemon.stop()
    release.set()
    for future in futures:
        future.result(timeout=10)
    assert order == [0, 1, 2, 3, 4]
