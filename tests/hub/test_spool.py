"""The spool folder behaves like a broker: at-least-once delivery, safe claims, ack after commit, parking."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edinbox import ConfigurationError
from edinbox._errors import SourceError
from edinbox.hub import HubConfig
from edinbox.sources import open_source, publisher
from edinbox.sources._spool_names import split_count
from edinbox.sources.spool import SpoolSource, publish, spool_path


async def _drain(source: SpoolSource) -> list:
    out = []
    while batch := await source.receive(max_messages=10, timeout=0.05):
        out.extend(batch)
    return out


def _names(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()} if folder.exists() else set()


def test_spool_url_names_the_folder(tmp_path: Path) -> None:
    """`dir:///abs/path` names an absolute folder and other schemes are refused with a clear error."""
    assert spool_path(f"dir://{tmp_path}") == tmp_path
    with pytest.raises(ConfigurationError, match="dir:///path"):
        spool_path("file:///tmp/x")
    with pytest.raises(ConfigurationError, match="claim_timeout"):
        open_source(f"dir://{tmp_path}?claim_timeout=soon", consumer="c")


async def test_publish_then_receive_then_ack_archives(tmp_path: Path) -> None:
    """Published payloads arrive once each with their producer id, and ack moves them to archive/."""
    url = f"dir://{tmp_path}"
    await publisher(url)(url, [("X12:ZZ:A>ZZ:B/000000001", b"one"), ("id with/slash", b"two")])
    assert not _names(tmp_path / "tmp")
    async with open_source(url, consumer="accounting") as source:
        deliveries = await _drain(source)
        assert [(d.payload, d.message_id) for d in deliveries] == [
            (b"one", "X12:ZZ:A>ZZ:B/000000001"),
            (b"two", "id with/slash"),
        ]
        assert all(d.delivery_count == 1 and not d.redelivered for d in deliveries)
        assert not _names(tmp_path / "inbound")
        for d in deliveries:
            await source.ack(d)
        assert await source.receive(max_messages=10, timeout=0.1) == []
    assert len(_names(tmp_path / "archive")) == 2


async def test_file_dropped_by_hand_is_keyed_by_its_name(tmp_path: Path) -> None:
    """A file without a producer id gets no message_id; its name is the fallback key."""
    async with SpoolSource(tmp_path, consumer="c") as source:
        (tmp_path / "inbound" / "partner-42.edi").write_bytes(b"ISA")
        [delivery] = await source.receive(max_messages=5, timeout=1)
        assert delivery.message_id is None
        assert delivery.key == "dir:partner-42.edi"


async def test_unacked_claims_go_back_on_close(tmp_path: Path) -> None:
    """Closing a source returns its unacked claims to inbound/ as redeliveries."""
    url = f"dir://{tmp_path}"
    await publish(url, [("a", b"A")])
    async with SpoolSource(tmp_path, consumer="c") as source:
        assert len(await _drain(source)) == 1
    async with SpoolSource(tmp_path, consumer="c") as source:
        [again] = await _drain(source)
        assert again.payload == b"A"
        assert again.redelivered
        assert again.delivery_count == 2
        assert again.message_id == "a"


async def test_a_spool_whose_inbound_folder_is_gone_is_a_source_error(tmp_path: Path) -> None:
    """inbound/ removed under a running source (the spool moved, a volume unmounted) is a SourceError naming it, which
    the hub waits out as an outage, not an empty spool that stays quiet forever; once it is back, files flow again."""
    async with SpoolSource(tmp_path, consumer="c") as source:
        (tmp_path / "inbound").rmdir()
        with pytest.raises(SourceError, match="inbound"):
            await source.receive(max_messages=1, timeout=0.2)
        (tmp_path / "inbound").mkdir()
        await publish(f"dir://{tmp_path}", [("back", b"x")])
        [delivery] = await source.receive(max_messages=1, timeout=2)
    assert delivery.key == "back"


async def test_reject_parks_the_file_with_its_reason(tmp_path: Path) -> None:
    """Reject moves the file to rejected/ with a reason file beside it, and it is never delivered again."""
    await publish(f"dir://{tmp_path}", [("junk", b"not EDI")])
    async with SpoolSource(tmp_path, consumer="c") as source:
        [d] = await _drain(source)
        await source.reject(d, reason="not a valid EDI interchange")
        assert await _drain(source) == []
    names = _names(tmp_path / "rejected")
    [data] = [n for n in names if not n.endswith(".reason")]
    assert f"{data}.reason" in names
    assert (tmp_path / "rejected" / data).read_bytes() == b"not EDI"
    assert "not a valid EDI interchange" in (tmp_path / "rejected" / f"{data}.reason").read_text()


async def test_nack_with_delay_holds_the_file_back(tmp_path: Path) -> None:
    """A nack with a delay redelivers the file, but not before the delay has passed."""
    await publish(f"dir://{tmp_path}", [("a", b"A")])
    async with SpoolSource(tmp_path, consumer="c") as source:
        [d] = await _drain(source)
        await source.nack(d, delay=2.0)
        assert await source.receive(max_messages=1, timeout=0.2) == []
        [again] = await source.receive(max_messages=1, timeout=30)
        assert again.delivery_count == 2


_CRASH = """
import asyncio, os, sys
from decimal import Decimal
from pathlib import Path
from edinbox.sources.spool import SpoolSource
async def main():
    source = SpoolSource(Path(sys.argv[1]), consumer="c")
    await source.open()
    got = await source.receive(max_messages=2, timeout=1)
    print(len(got), flush=True)
    os._exit(0)  # dies with its claims in processing/, like a SIGKILL after the commit
asyncio.run(main())
"""


def test_claims_of_a_dead_process_are_redelivered(tmp_path: Path) -> None:
    """Files claimed by a process that died before acking are recovered and delivered again."""
    asyncio.run(publish(f"dir://{tmp_path}", [(str(i), str(i).encode()) for i in range(3)]))
    out = subprocess.run([sys.executable, "-c", _CRASH, str(tmp_path)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "2"

    async def drain() -> list:
        async with SpoolSource(tmp_path, consumer="c") as source:
            return await _drain(source)

    got = asyncio.run(drain())
    assert sorted(d.payload for d in got) == [b"0", b"1", b"2"]
    assert sorted(d.delivery_count for d in got) == [1, 2, 2]


async def test_stale_claim_of_a_live_owner_is_recovered_after_the_timeout(tmp_path: Path) -> None:
    """A claim older than claim_timeout is taken back even when its owner still runs (e.g. another host)."""
    await publish(f"dir://{tmp_path}", [("a", b"A")])
    # a claim timeout that a loaded machine cannot outlast between the claim and the second source's first look
    async with SpoolSource(tmp_path, consumer="slow", claim_timeout=3) as slow:
        assert len(await _drain(slow)) == 1
        async with SpoolSource(tmp_path, consumer="fast", claim_timeout=3) as fast:
            assert await fast.receive(max_messages=1, timeout=0.05) == []
            await asyncio.sleep(3.1)
            assert fast.recover() == 1
            [again] = await fast.receive(max_messages=1, timeout=30)
            assert again.redelivered


_CLAIMER = """
import asyncio, json, os, sys
from decimal import Decimal
from pathlib import Path
from edinbox.sources.spool import SpoolSource
async def main():
    async with SpoolSource(Path(sys.argv[1]), consumer="c") as source:
        gate = Path(sys.argv[2])
        (gate / str(os.getpid())).touch()
        while len(list(gate.iterdir())) < int(sys.argv[3]):  # every claimer is up before any of them starts
            await asyncio.sleep(0.05)
        seen = []
        while batch := await source.receive(max_messages=3, timeout=0.3):
            for d in batch:
                seen.append(d.message_id)
                await source.ack(d)
            await asyncio.sleep(0.02)  # a hub's transaction takes a while: the others get their share
    print(json.dumps(seen))
asyncio.run(main())
"""


def test_competing_processes_never_receive_the_same_file(tmp_path: Path) -> None:
    """Three processes draining one spool together receive every file exactly once between them."""
    ids = [f"m{i:04d}" for i in range(300)]
    spool, gate = tmp_path / "spool", tmp_path / "gate"
    asyncio.run(publish(f"dir://{spool}", [(i, i.encode()) for i in ids]))
    (spool / "processing").mkdir(exist_ok=True)
    gate.mkdir()
    command = [sys.executable, "-c", _CLAIMER, str(spool), str(gate), "3"]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(3)]
    seen = []
    for p in procs:
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        seen.append(json.loads(out))
    everything = [m for s in seen for m in s]
    assert sorted(everything) == ids
    assert sum(1 for s in seen if s) >= 2, "the processes should have shared the work"
    assert len(os.listdir(spool / "archive")) == 300


def test_publish_is_atomic_for_readers(tmp_path: Path) -> None:
    """A published file appears in inbound/ complete, and nothing is left behind in tmp/."""
    payload = b"x" * 2_000_000
    asyncio.run(publish(f"dir://{tmp_path}", [("big", payload)]))
    [name] = os.listdir(tmp_path / "inbound")
    assert (tmp_path / "inbound" / name).read_bytes() == payload
    assert os.listdir(tmp_path / "tmp") == []


async def test_the_hub_settles_a_spool_full_of_odd_entries_without_crashing(hub_config: HubConfig, spool: Path) -> None:
    """Good invoices between a newline name, a 255-byte name, a folder, a symlink, a name that is not UTF-8, a fifo
    and an abandoned dot-file: the hub creates the invoices, counts each odd entry as rejected, and leaves nothing
    in inbound/ or processing/."""
    from edinbox.hub import open_hub
    from edinbox.hub.demo._traffic import PARTNERS, Doc, render
    from hub_ops import stats
    from sources.test_spool_refused import ODD, SECRET

    lines = ((1, Decimal("5.00")),)
    good = [(f"inv{i}", render(Doc(PARTNERS[0], f"00000070{i}", "invoice", f"INV-{i}", lines=lines))) for i in range(3)]
    await publish(hub_config.source, good[:1])
    (spool / "inbound").mkdir(exist_ok=True)
    for make in ODD.values():
        make(spool / "inbound")
    await publish(hub_config.source, good[1:])
    async with open_hub(hub_config) as hub:
        totals = dict(await hub.run(once=True))
    assert totals == {"processed": 3, "rejected": len(ODD)}
    counts = await stats(hub_config)
    assert (counts["invoices"], counts["rejected"]) == (3, len(ODD))
    assert os.listdir(spool / "inbound") == []
    assert list((spool / "processing").rglob("*")) == []
    assert (spool.parent / "outside.txt").read_bytes() == SECRET


async def test_a_file_over_max_payload_is_kept_once_and_the_database_holds_its_head(
    hub_config: HubConfig, spool: Path
) -> None:
    """A 40 MB file (over the 32 MiB default) stays whole in rejected/ only; the rejected table holds its first
    64 KiB, and the delivery is counted as rejected."""
    from edinbox.hub import open_hub
    from edinbox.sources.spool import HEAD
    from hub_ops import list_rows, show, stats

    (spool / "inbound").mkdir(exist_ok=True)
    (spool / "inbound" / "huge.edi").write_bytes(os.urandom(40 * 1024 * 1024))
    async with open_hub(hub_config) as hub:
        totals = dict(await hub.run(once=True))
    assert totals == {"rejected": 1}
    assert (spool / "rejected" / "huge.edi").stat().st_size == 40 * 1024 * 1024
    assert "max_payload" in (spool / "rejected" / "huge.edi.reason").read_text()
    [row] = await list_rows(hub_config, status="rejected", limit=5)
    detail = await show(hub_config, row["key"])
    assert detail is not None
    assert len(detail["payload"]) <= HEAD
    assert (await stats(hub_config))["rejected"] == 1


@settings(max_examples=500, deadline=None)
@given(name=st.text(alphabet=st.sampled_from("ab~.#19\u0662\n"), max_size=12))
def test_a_names_delivery_count_is_the_digits_after_its_last_hash(name: str) -> None:
    """`split_count` reads `<name>#<count>` as the lazy pattern the spool used to match it with: the digits after the
    last `#` when only digits follow it, else the whole name and a count of 1."""
    match = re.fullmatch(r"(?P<name>.*?)(?:#(?P<count>\d+))?", name, re.DOTALL)
    assert match is not None
    assert split_count(name) == (match["name"], int(match["count"] or 1))
