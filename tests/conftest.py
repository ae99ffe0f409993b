"""Shared fixtures: the real servers this machine runs, and a fail-don't-skip rule on CI."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator

import pytest

from servers import PrivateDatabase, PrivateMariaDB, PrivatePostgres, PrivateRabbitMQ
from services import POSTGRES_URL, require_service


@pytest.fixture
def postgres_url() -> str:
    """URL of the real PostgreSQL test database."""
    require_service("postgres")
    return POSTGRES_URL


@pytest.fixture
def unique_name() -> Iterator[str]:
    """A fresh identifier for tables, queues, streams and schemas, so parallel runs never collide."""
    return "t" + uuid.uuid4().hex[:12]


@pytest.fixture(scope="session")
def _rabbitmq_node() -> Iterator[PrivateRabbitMQ]:
    """One private RabbitMQ node per test process (a node takes about 10 s to boot), deleted at the end."""
    if sys.platform != "linux":
        pytest.skip("a private RabbitMQ node is started on Linux")
    with PrivateRabbitMQ() as node:
        yield node


@pytest.fixture
def private_rabbitmq(_rabbitmq_node: PrivateRabbitMQ) -> PrivateRabbitMQ:
    """The process's private RabbitMQ node, for fault tests that stop, kill, block or cut it (never the shared
    server): started again when an earlier test left it down, its publishers unblocked when an earlier test left them
    blocked (a `rabbitmqctl` call, about a second, only then). Tests sharing it use queues of their own
    (`unique_name`)."""
    if _rabbitmq_node.running:
        if _rabbitmq_node.blocked:
            _rabbitmq_node.unblock_publishers()
    else:
        _rabbitmq_node.start()
    return _rabbitmq_node


@pytest.fixture(scope="module", params=["postgresql", "mariadb"])
def _database_server(request: pytest.FixtureRequest) -> Iterator[PrivatePostgres | PrivateMariaDB]:
    """A private PostgreSQL, then a private MariaDB, for one module's fault tests (a server takes seconds to make and
    start), deleted after the module."""
    if sys.platform != "linux":
        pytest.skip("private database servers are started on Linux")
    with PrivatePostgres() if request.param == "postgresql" else PrivateMariaDB() as server:
        yield server


@pytest.fixture
def private_database(_database_server: PrivatePostgres | PrivateMariaDB, unique_name: str) -> Iterator[PrivateDatabase]:
    """A fresh database on the module's private PostgreSQL or MariaDB server, for a fault test that stops and starts
    the server (never a shared one): started again when an earlier test left it down; dropped after the test."""
    database = PrivateDatabase(_database_server, unique_name)
    yield database
    database.drop()


HEAVY = (
    "tests/hub/test_chaos.py",
    "tests/outbox/test_relay_rabbitmq_outage.py",
    "tests/inbox/test_inbox_contract.py",
    "tests/brokers/test_proof.py",
    "tests/cli/test_cli_demo.py",
    "tests/cli/test_cli.py",
    "tests/hub/test_outage.py",
    "tests/hub/test_purge_run.py",
    "tests/hub/test_hub.py",
    "tests/hub/test_acks_outage.py",
    "tests/cli/test_privileges.py",
    "tests/hub/test_poison.py",
    "tests/inbox/test_inbox_state_machine.py",
    "tests/outbox/test_relay_kill.py",
    "tests/cli/test_stop_matrix.py",
    "tests/hub/test_rejections.py",
    "tests/hub/test_acknowledgments_mixed.py",
    "tests/console/test_console_browser.py",
    "tests/console/test_console_security.py",
    "tests/edi/test_edi_growth.py",
    "tests/console/test_console_attacks_browser.py",
    "tests/edi/test_edi_fuzz.py",
    "tests/cli/test_redrive.py",
    "tests/brokers/test_kafka_proof.py",
    "tests/accounting/test_service_limits.py",
    "tests/sources/test_rabbitmq.py",
    "tests/hub/test_stop.py",
    "tests/hub/test_relay_process.py",
    "tests/console/test_console_outage.py",
    "tests/inbox/test_inbox_mariadb_rollback.py",
    "tests/security/test_no_secret_printed.py",
    "tests/brokers/test_kafka_dead_letter.py",
    "tests/hub/test_memory.py",
    "tests/accounting/test_hub_http.py",
    "tests/brokers/test_kafka_outage.py",
    "tests/cli/test_settings.py",
    "tests/hub/test_metrics.py",
    "tests/outbox/test_relay_brokers.py",
    "tests/brokers/test_scale_out.py",
    "tests/hub/test_failover_chaos.py",
    "tests/sources/test_kafka.py",
    "tests/hub/test_acknowledgments.py",
    "tests/loop/test_consume_faults.py",
    "tests/hub/test_trailers.py",
    "tests/hub/test_acknowledgments_kill.py",
    "tests/hub/test_log_format.py",
    "tests/outbox/test_outbox.py",
    "tests/outbox/test_outbox_relays.py",
    "tests/console/test_console_inputs.py",
    "tests/security/test_partner_text.py",
)
"""The modules that take longest, longest first: the 50 longest of the last measurement over the whole suite (with
`--junitxml`: 7,200 s in all on three workers at a background load of about 15), the first four measured again one by
one, before and after side by side at a load of 3 to 12, once the inbox contract's journals were kept between its
tests (231 s -> 168 s) and the proof's hubs stopped on a drained broker instead of an idle timeout (152 s -> 131 s),
while chaos (252 s -> 242 s) and the relay's outages (106 s -> 102 s) stayed: scaled to the last whole measurement,
chaos and the relay's outages lead now. The suite's workers take whole modules (`--dist loadfile`) in collection
order (`--no-loadscope-reorder`), so the longest start first and the rest fill in around them: no long module is
left to run alone at the end."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the heavy modules' tests first (in `HEAVY`'s order), the rest after in their collection order."""
    rank = {path: index for index, path in enumerate(HEAVY)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
