"""A librdkafka mock cluster the test can take down and bring back: librdkafka's own mock API through ctypes.

confluent-kafka hosts a mock cluster (`test.mock.num.brokers`) but does not expose its controls; the library it
loads exports them (`rd_kafka_mock_broker_set_down`, ...), so this module makes its own handle in that library and
a cluster on it, reached by other processes over TCP like `edinbox.sources.kafka.MockCluster`.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from types import TracebackType

import confluent_kafka

from edinbox.sources._kafka_config import MockCluster

__all__ = ["ControlledCluster"]

_PRODUCER = 0
_PRODUCE = 0  # the Produce request's ApiKey


def _library() -> ctypes.CDLL:
    """The librdkafka confluent-kafka loaded (its wheel ships it beside the package)."""
    folder = Path(confluent_kafka.__file__).resolve().parent.parent / "confluent_kafka.libs"
    [path] = sorted(folder.glob("librdkafka*.so*"))
    lib = ctypes.CDLL(str(path))
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_conf_set.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
    lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    for name in ("rd_kafka_mock_broker_set_down", "rd_kafka_mock_broker_set_up"):
        getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_int32]
        getattr(lib, name).restype = ctypes.c_int
    lib.rd_kafka_mock_topic_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    lib.rd_kafka_mock_topic_create.restype = ctypes.c_int
    lib.rd_kafka_mock_partition_set_leader.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int32]
    lib.rd_kafka_mock_partition_set_leader.restype = ctypes.c_int
    lib.rd_kafka_mock_coordinator_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int32]
    lib.rd_kafka_mock_coordinator_set.restype = ctypes.c_int
    lib.rd_kafka_mock_push_request_errors_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_int16,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_int),
    ]
    return lib


class ControlledCluster(MockCluster):
    """A mock cluster of `brokers` brokers (ids 1..n) whose brokers can be set down (their connections closed, new
    ones refused) and up again; its URLs are `MockCluster`'s."""

    def __init__(self, brokers: int = 1) -> None:
        """Start the cluster on loopback ports."""
        self._lib = _library()
        errors = ctypes.create_string_buffer(512)
        conf = self._lib.rd_kafka_conf_new()
        self._lib.rd_kafka_conf_set(conf, b"log_level", b"0", errors, len(errors))
        self._rk = self._lib.rd_kafka_new(_PRODUCER, conf, errors, len(errors))
        if not self._rk:
            raise RuntimeError(errors.value.decode())
        self._cluster = self._lib.rd_kafka_mock_cluster_new(self._rk, brokers)
        self.brokers = brokers
        self.bootstrap = self._lib.rd_kafka_mock_cluster_bootstraps(self._cluster).decode()
        """`host:port,...` of the mock brokers."""

    def down(self, *brokers: int) -> None:
        """Take the brokers given (every broker when none is) down: connections are closed and new ones refused."""
        for broker in brokers or range(1, self.brokers + 1):
            assert self._lib.rd_kafka_mock_broker_set_down(self._cluster, broker) == 0

    def up(self, *brokers: int) -> None:
        """Bring the brokers given (every broker when none is) back."""
        for broker in brokers or range(1, self.brokers + 1):
            assert self._lib.rd_kafka_mock_broker_set_up(self._cluster, broker) == 0

    def topic(self, name: str, *, leader: int) -> None:
        """Create a topic of one partition led by broker `leader` (its records then stay in order)."""
        assert self._lib.rd_kafka_mock_topic_create(self._cluster, name.encode(), 1, 1) == 0
        assert self._lib.rd_kafka_mock_partition_set_leader(self._cluster, name.encode(), 0, leader) == 0

    def coordinator(self, group: str, *, broker: int) -> None:
        """Make broker `broker` the coordinator of consumer group `group`."""
        assert self._lib.rd_kafka_mock_coordinator_set(self._cluster, b"group", group.encode(), broker) == 0

    def refuse_produce(self, count: int, *, error: int = confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE) -> None:
        """Answer the next `count` produce requests, on any broker, with `error` (a record too large by default)."""
        errors = (ctypes.c_int * count)(*[error] * count)
        self._lib.rd_kafka_mock_push_request_errors_array(self._cluster, _PRODUCE, count, errors)

    def close(self) -> None:
        """Stop the cluster and its handle."""
        if self._cluster:
            self._lib.rd_kafka_mock_cluster_destroy(self._cluster)
            self._cluster = None
        if self._rk:
            self._lib.rd_kafka_destroy(self._rk)
            self._rk = None

    def __enter__(self) -> ControlledCluster:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
