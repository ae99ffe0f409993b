"""The spool takes regular files only: anything else in inbound/ is parked with its reason, and receive never raises."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from edinbox import ConfigurationError
from edinbox.sources import open_source
from edinbox.sources._base import Delivery
from edinbox.sources.spool import BATCH_BYTES, HEAD, SpoolSource, publish

SECRET = b"a file outside the spool that must never be read"


async def _drain(source: SpoolSource, *, batch: int = 3) -> list[Delivery]:
    """Receive until idle, settling each delivery the way the hub does (reject the refused ones, ack the others)."""
    out: list[Delivery] = []
    while got := await source.receive(max_messages=batch, timeout=0.1):
        for d in got:
            if d.reason:
                await source.reject(d, reason=d.reason)
            else:
                await source.ack(d)
        out.extend(got)
    return out


def _parked(root: Path) -> dict[str, str]:
    """The files in rejected/ (links and folders too), each with the text of its `.reason`."""
    folder = root / "rejected"
    names = [n for n in os.listdir(folder) if not n.endswith(".reason")]
    return {n: (folder / f"{n}.reason").read_text() for n in names}


def _newline(inbound: Path) -> str:
    (inbound / "two\nlines.edi").write_bytes(b"ISA newline")
    return "two\\x0alines.edi"


def _long_name(inbound: Path) -> str:
    name = "L" * 251 + ".edi"  # 255 bytes: its `.reason` would be too long
    (inbound / name).write_bytes(b"ISA long")
    return name


def _directory(inbound: Path) -> str:
    (inbound / "sub").mkdir()
    (inbound / "sub" / "inner.edi").write_bytes(b"ISA inner")
    return "sub"


def _symlink(inbound: Path) -> str:
    outside = inbound.parent.parent / "outside.txt"
    outside.write_bytes(SECRET)
    (inbound / "link.edi").symlink_to(outside)
    return "link.edi"


def _bad_utf8(inbound: Path) -> str:
    with open(os.fsencode(inbound) + b"/caf\xe9.edi", "wb") as fh:
        fh.write(b"ISA latin-1 name")
    return "caf\\xe9.edi"


def _control(inbound: Path) -> str:
    (inbound / "bell\x07.edi").write_bytes(b"ISA bell")
    return "bell\\x07.edi"


def _fifo(inbound: Path) -> str:
    os.mkfifo(inbound / "pipe.edi")
    return "pipe.edi"


def _stale_dotfile(inbound: Path) -> str:
    path = inbound / ".upload.edi.tmp"
    path.write_bytes(b"ISA half")
    os.utime(path, (1_000_000, 1_000_000))  # untouched for decades: its producer gave up
    return ".upload.edi.tmp"


ODD: dict[str, Callable[[Path], str]] = {
    "newline in the name": _newline,
    "255-byte name": _long_name,
    "directory": _directory,
    "symlink": _symlink,
    "name not UTF-8": _bad_utf8,
    "control character in the name": _control,
    "fifo": _fifo,
    "abandoned dot-file": _stale_dotfile,
}


@pytest.mark.parametrize("kind", list(ODD))
async def test_odd_entry_is_parked_with_its_reason_between_good_files(tmp_path: Path, kind: str) -> None:
    """Each odd entry comes out once as a refused delivery, lands in rejected/ with its original name (escaped) in
    its `.reason`, and the good files around it are delivered; nothing stays in inbound/ or processing/."""
    root = tmp_path / "spool"
    await publish(f"dir://{root}", [("before", b"ISA one")])
    shown = ODD[kind](root / "inbound")
    await publish(f"dir://{root}", [("after", b"ISA two")])
    async with SpoolSource(root, consumer="c") as source:
        got = await _drain(source)
    good = sorted(d.message_id or "" for d in got if not d.reason)
    [refused] = [d for d in got if d.reason]
    assert good == ["after", "before"]
    assert SECRET not in refused.payload
    assert os.listdir(root / "inbound") == []
    assert list((root / "processing").rglob("*")) == []
    [(parked, note)] = _parked(root).items()
    assert refused.coordinates == f"dir:rejected/{parked}"
    assert shown in note
    assert refused.reason.splitlines()[0] in note


async def test_a_symlink_is_parked_as_a_link_and_its_target_is_never_read(tmp_path: Path) -> None:
    """A symlink in inbound/ is moved to rejected/ as the link itself: the file it points to is untouched, unread."""
    root = tmp_path / "spool"
    async with SpoolSource(root, consumer="c") as source:
        _symlink(root / "inbound")
        [d] = await _drain(source)
    assert d.payload == b""
    assert "symbolic link" in d.reason
    assert (root / "rejected" / "link.edi").is_symlink()
    assert (tmp_path / "outside.txt").read_bytes() == SECRET


async def test_a_fresh_dotfile_is_left_to_its_producer(tmp_path: Path) -> None:
    """A dot-file still being written is neither delivered nor parked; once untouched past dotfile_timeout it is."""
    root = tmp_path / "spool"
    async with SpoolSource(root, consumer="c", dotfile_timeout=3600) as source:
        (root / "inbound" / ".partial.edi").write_bytes(b"ISA half")
        assert await _drain(source) == []
        assert os.listdir(root / "inbound") == [".partial.edi"]
    async with SpoolSource(root, consumer="c", dotfile_timeout=0.01) as source:
        [d] = await _drain(source)
    assert "dot" in d.reason
    assert d.payload == b"ISA half"
    assert os.listdir(root / "inbound") == []


def _rchar() -> int:
    """Bytes this process has read through system calls so far (Linux)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


async def test_a_file_over_max_payload_is_parked_without_being_read(tmp_path: Path) -> None:
    """A 50 MB file over max_payload is parked whole in rejected/, and the delivery carries only its first 64 KiB
    and its size: the process reads far less than the file."""
    root = tmp_path / "spool"
    async with SpoolSource(root, consumer="c", max_payload=1024 * 1024) as source:
        big = root / "inbound" / "big.edi"
        big.write_bytes(os.urandom(50 * 1024 * 1024))
        before = _rchar()
        [d] = await source.receive(max_messages=5, timeout=1)
        read = _rchar() - before
        await source.reject(d, reason=d.reason)
    assert read < 1024 * 1024
    assert "max_payload" in d.reason
    assert len(d.payload) == HEAD
    assert d.size == 50 * 1024 * 1024
    assert d.truncated
    assert (root / "rejected" / "big.edi").stat().st_size == 50 * 1024 * 1024
    assert d.payload == (root / "rejected" / "big.edi").read_bytes()[:HEAD]


async def test_a_file_at_max_payload_is_delivered_whole(tmp_path: Path) -> None:
    """A file of exactly max_payload bytes is an ordinary delivery, not truncated."""
    root = tmp_path / "spool"
    async with SpoolSource(root, consumer="c", max_payload=100_000) as source:
        (root / "inbound" / "edge.edi").write_bytes(b"x" * 100_000)
        [d] = await source.receive(max_messages=5, timeout=1)
    assert d.reason == ""
    assert len(d.payload) == 100_000
    assert not d.truncated


async def test_a_receive_stops_claiming_once_its_files_add_up_to_batch_bytes(tmp_path: Path) -> None:
    """Five files of half BATCH_BYTES each come two by two (then the last alone), however many `max_messages`
    allows, and none is left behind; small files still fill a batch."""
    root = tmp_path / "spool"
    async with SpoolSource(root, consumer="c") as source:
        for i in range(5):
            (root / "inbound" / f"big{i}.edi").write_bytes(b"x" * (BATCH_BYTES // 2))
        big = [await source.receive(max_messages=100, timeout=1) for _ in range(3)]
        for i in range(7):
            (root / "inbound" / f"small{i}.edi").write_bytes(b"x" * 100)
        small = await source.receive(max_messages=100, timeout=1)
    assert [len(batch) for batch in big] == [2, 2, 1]
    assert [d.coordinates for batch in big for d in batch] == [f"dir:big{i}.edi" for i in range(5)]
    assert len(small) == 7


def test_max_payload_and_dotfile_timeout_are_url_options(tmp_path: Path) -> None:
    """The URL (or a keyword option) sets max_payload and dotfile_timeout; a bad value is a configuration error."""
    source = open_source(f"dir://{tmp_path}?max_payload=2048&dotfile_timeout=60", consumer="c")
    assert isinstance(source, SpoolSource)
    assert (source.max_payload, source.dotfile_timeout) == (2048, 60.0)
    assert open_source(f"dir://{tmp_path}", consumer="c", max_payload=7).max_payload == 7  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match="max_payload"):
        open_source(f"dir://{tmp_path}?max_payload=0", consumer="c")


async def test_reject_never_replaces_an_earlier_parked_file(tmp_path: Path) -> None:
    """Two rejected files of the same name both stay in rejected/, each with its own reason."""
    root = tmp_path / "spool"
    async with SpoolSource(root, consumer="c") as source:
        for payload in (b"first", b"second"):
            (root / "inbound" / "same.edi").write_bytes(payload)
            [d] = await source.receive(max_messages=1, timeout=1)
            await source.reject(d, reason=f"bad {payload.decode()}")
    parked = _parked(root)
    assert len(parked) == 2
    assert sorted((root / "rejected" / n).read_bytes() for n in parked) == [b"first", b"second"]
    assert sorted(note.splitlines()[0] for note in parked.values()) == ["bad first", "bad second"]


async def test_files_are_delivered_in_name_order_and_late_files_join(tmp_path: Path) -> None:
    """Waiting files come in name order, and a file dropped after the listing is delivered too."""
    root = tmp_path / "spool"
    async with SpoolSource(root, consumer="c") as source:
        for name in ("c.edi", "a.edi", "b.edi"):
            (root / "inbound" / name).write_bytes(name.encode())
        first = await source.receive(max_messages=2, timeout=1)
        (root / "inbound" / "0-late.edi").write_bytes(b"late")
        rest = await _drain(source)
    assert [d.payload for d in first] == [b"a.edi", b"b.edi"]
    assert sorted(d.payload for d in rest) == [b"c.edi", b"late"]


async def test_sources_sharing_a_spool_with_odd_files_split_the_work_exactly_once(tmp_path: Path) -> None:
    """Three sources on one spool full of good and odd entries: each good file is delivered once, each odd entry is
    parked once, and no receive raises."""
    root = tmp_path / "spool"
    await publish(f"dir://{root}", [(f"m{i:03d}", b"ISA %d" % i) for i in range(60)])
    for make in ODD.values():
        make(root / "inbound")
    sources = [SpoolSource(root, consumer=f"c{i}") for i in range(3)]
    for s in sources:
        await s.open()
    seen: list[list[Delivery]] = [[] for _ in sources]
    idle = 0
    while idle < 3:
        idle = 0
        for i, s in enumerate(sources):
            got = await s.receive(max_messages=4, timeout=0.05)
            idle += not got
            for d in got:
                await (s.reject(d, reason=d.reason) if d.reason else s.ack(d))
            seen[i].extend(got)
    for s in sources:
        await s.aclose()
    everything = [d for s in seen for d in s]
    assert sorted(d.message_id for d in everything if not d.reason) == [f"m{i:03d}" for i in range(60)]
    assert len([d for d in everything if d.reason]) == len(ODD)
    assert len(_parked(root)) == len(ODD)
    assert sum(1 for s in seen if s) >= 2
    assert os.listdir(root / "inbound") == []


async def test_odd_files_stranded_by_an_older_version_are_recovered_without_a_crash(tmp_path: Path) -> None:
    """Odd entries an earlier release left in a dead process's claim folder are recovered, then parked."""
    root = tmp_path / "spool"
    dead = root / "processing" / f"c@{socket.gethostname()}@999999999@deadbeef"
    dead.mkdir(parents=True)
    _newline(dead)
    _long_name(dead)
    _directory(dead)
    async with SpoolSource(root, consumer="c") as source:
        got = await _drain(source)
    assert len(got) == 3
    assert all(d.reason for d in got)
    assert not dead.exists()
    assert len(_parked(root)) == 3


async def test_a_claim_whose_pid_was_reused_is_recovered_at_once(tmp_path: Path) -> None:
    """A claim folder naming a live pid with another start time (the pid was reused) is recovered without waiting
    for claim_timeout; the claims of a live owner are not."""
    root = tmp_path / "spool"
    host = socket.gethostname()
    reused = root / "processing" / f"c@{host}@{os.getpid()}.1@deadbeef"
    reused.mkdir(parents=True)
    (reused / "claimed.edi").write_bytes(b"ISA")
    async with SpoolSource(root, consumer="c", claim_timeout=3600) as source:
        [d] = await source.receive(max_messages=5, timeout=1)
        assert (d.payload, d.delivery_count) == (b"ISA", 2)
        async with SpoolSource(root, consumer="other", claim_timeout=3600) as other:
            assert other.recover() == 0  # the live first source keeps its claim
        await source.ack(d)
    assert not reused.exists()


async def test_nothing_raises_when_inbound_holds_only_odd_entries(tmp_path: Path) -> None:
    """A spool holding every kind of odd entry at once drains to empty in batches of one, without an exception."""
    root = tmp_path / "spool"
    async with SpoolSource(root, consumer="c") as source:
        for make in ODD.values():
            make(root / "inbound")
        got = await _drain(source, batch=1)
    assert len(got) == len(ODD)
    assert all(d.reason and d.key.startswith("dir:rejected/") for d in got)
    modes = {stat.S_IFMT(os.lstat(root / "rejected" / n).st_mode) for n in _parked(root)}
    assert modes == {stat.S_IFREG, stat.S_IFDIR, stat.S_IFLNK, stat.S_IFIFO}
