"""The operator functions work on the inbox they are given: on a journal in memory, which only that inbox's connection
can see, each of them finds what the hub settled there."""

from __future__ import annotations

from pathlib import Path

from edinbox import Message
from edinbox.hub import HubConfig, ops
from edinbox.hub.database import open_inbox


async def test_every_operator_function_reads_the_inbox_it_is_given(tmp_path: Path) -> None:
    """init, stats, list, show, find, write_payload, requeue, forget, migrate and doctor all see the one message
    processed in an in-memory SQLite journal: an inbox of their own would see an empty database."""
    config = HubConfig(db="sqlite:///:memory:")
    async with open_inbox(config) as inbox:
        await ops.init(inbox, config=config)
        message = Message("000000701", "X12:ZZ:ACME>ZZ:HUB", b"payload-701")

        async def nothing(tx: object, message: Message) -> None:
            """A handler with no effect."""

        await inbox.process(message, nothing)
        key = ops.join_key(message.source, message.message_id)
        assert (await ops.stats(inbox))["journal"]["processed"] == 1
        assert [row["key"] for row in await ops.list_rows(inbox, status=None, limit=10)] == [key]
        found = await ops.find(inbox, key)
        assert found is not None
        assert found.record is not None
        assert found.data["status"] == "processed"
        assert found.kept is not None
        assert found.kept.payload == b"payload-701"
        assert await ops.write_payload(inbox, key, tmp_path / "out.bin") == len(b"payload-701")
        assert not await ops.requeue(inbox, key)  # processed: nothing to requeue
        assert (await ops.migrate(inbox, table=config.table))["applied"] == []
        checks = {check.name: check.status for check in await ops.doctor(inbox, config=config)}
        assert checks["journal"] == "ok"
        assert await ops.forget(inbox, key)
        assert await ops.show(inbox, key) is None


async def test_doctor_reads_replication_where_the_database_has_replicas(hub_config: HubConfig) -> None:
    """The replication check asks every store the same named query: PostgreSQL answers with its state (this test
    server streams to no standby: ok), SQLite and MariaDB find no row, and the check is left out."""
    from edinbox.hub.ops._replication import replication
    from hub_ops import init

    await init(hub_config)
    async with open_inbox(hub_config) as inbox:
        found = await replication(inbox)
    if inbox.dialect == "postgresql":
        assert found is not None
        assert found[0] == "ok"
    else:
        assert found is None
