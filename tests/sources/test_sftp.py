"""The SFTP source and publisher against a real OpenSSH server (`PrivateSSH`): files taken once they stopped changing,
keyed by their remote identity, archived only by the ack and only when unchanged; links, oversize and unreadable
files parked, the rest delivered; the host key always checked; a server down is transient."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from edinbox import ConfigurationError, SourceError
from edinbox.sources import Delivery, Source, open_source, publisher
from edinbox.sources._sftp_connect import asyncssh
from edinbox.sources._sftp_listing import Listing
from edinbox.sources.sftp import SftpSource
from servers import PrivateSSH

FAST = {"settle": "0.3", "poll": "0.1"}


@pytest.fixture(scope="module")
def ssh() -> Iterator[PrivateSSH]:
    """One OpenSSH server for the module's tests (each uses a folder of its own)."""
    with PrivateSSH() as server:
        yield server


def _source(url: str, **options: object) -> Source:
    return open_source(url, consumer="hub", **options)


async def _collect(source: Source, count: int, *, within: float = 10.0) -> list[Delivery]:
    deadline = time.monotonic() + within
    got: list[Delivery] = []
    while len(got) < count and time.monotonic() < deadline:
        got.extend(await source.receive(max_messages=count - len(got), timeout=0.5))
    return got


def _write(path: Path, data: bytes, ssh: PrivateSSH) -> None:
    path.write_bytes(data)
    if os.getuid() == 0:  # the login user owns the files a partner drops
        os.chown(path, ssh.user.pw_uid, ssh.user.pw_gid)


async def test_published_files_arrive_once_keyed_by_identity_and_archive_on_ack(ssh: PrivateSSH) -> None:
    """The publisher writes under a temporary name and renames (a resend of the same id leaves one file); the source
    delivers each file with its remote identity as key, gives a nacked one again with its count, and the ack moves it
    to archive/ (beside, never over, an archived file of the same name)."""
    url = ssh.url("arrive", **FAST)
    send = publisher(url)
    await send(url, [("X12:ZZ:A>ZZ:B/000000001", b"ISA one"), ("second", b"ISA two")])
    await send(url, [("second", b"ISA two"), ("second", b"ISA two")])  # a relay's retries: the same name, replaced
    assert sorted(p.name for p in ssh.folder("arrive").iterdir()) == [
        "X12%3AZZ%3AA%3EZZ%3AB%2F000000001.edi",
        "second.edi",
    ]
    async with _source(url) as source:
        first = await _collect(source, 2)
        assert sorted(d.payload for d in first) == [b"ISA one", b"ISA two"]
        one = next(d for d in first if d.payload == b"ISA one")
        assert one.message_id is None
        assert one.key.startswith(f"sftp:127.0.0.1:{ssh.port}{ssh.folder('arrive')}/X12%3AZZ")
        assert one.key.endswith(":" + hashlib.sha256(b"ISA one").hexdigest())
        await source.nack(one)
        await source.ack(next(d for d in first if d is not one))
        [again] = await _collect(source, 1)
        assert (again.key, again.delivery_count, again.redelivered) == (one.key, 2, True)
        await source.ack(again)
        assert await source.receive(max_messages=5, timeout=0.5) == []
        await send(url, [("second", b"ISA two")])  # sent again after it was archived: archived beside the first
        [late] = await _collect(source, 1)
        await source.ack(late)
    archived = sorted(p.name for p in ssh.folder("arrive/archive").iterdir())
    assert archived[:2] == ["X12%3AZZ%3AA%3EZZ%3AB%2F000000001.edi", "second.edi"]
    assert len(archived) == 3
    assert archived[2].startswith("second.edi.")


def test_edinbox_publish_drops_a_file_and_prints_no_driver_warning(ssh: PrivateSSH, tmp_path: Path) -> None:
    """`edinbox publish FILE --to sftp://...` drops the interchange under its key's name and writes nothing to stderr
    (asyncssh's import-time deprecation warnings stay out of the operator's terminal)."""
    from edinbox.hub.demo._traffic import render
    from hub.test_hub import doc

    (tmp_path / "inv.edi").write_bytes(render(doc()))
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDINBOX_")}
    command = [sys.executable, "-m", "edinbox.cli", "publish", str(tmp_path / "inv.edi"), "--to", ssh.url("cli")]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert [p.name for p in ssh.folder("cli").iterdir()] == ["X12%3AZZ%3AACMESUPPLY%3EZZ%3AEDINBOXHUB%2F000000101.edi"]


async def test_a_growing_file_is_taken_only_once_it_stopped_changing(ssh: PrivateSSH) -> None:
    """A file appended to between listings is not delivered while it grows; once it keeps its size and time for the
    settle time it is delivered whole."""
    folder = ssh.folder("grow")
    async with _source(ssh.url("grow", settle="1.0", poll="0.1")) as source:
        path = folder / "big.edi"
        _write(path, b"ISA part 1;", ssh)
        for n in range(2, 6):
            assert await source.receive(max_messages=5, timeout=0.3) == []
            with path.open("ab") as file:
                file.write(f"part {n};".encode())
            os.utime(path, (time.time() + n, time.time() + n))  # mtime has whole seconds over SFTP: step it
        [delivery] = await _collect(source, 1)
        assert delivery.payload == b"ISA part 1;part 2;part 3;part 4;part 5;"
        await source.ack(delivery)


async def test_a_file_changed_after_it_settled_is_not_consumed_until_it_settles_again(
    ssh: PrivateSSH, caplog: pytest.LogCaptureFixture
) -> None:
    """A file that changes between the listing that found it settled and its reading is not handed out (the reading
    checks size and time again); its new content is delivered once it settled again, the old one never."""
    folder = ssh.folder("changing")
    _write(folder / "a.edi", b"ISA a", ssh)
    _write(folder / "b.edi", b"ISA b, first", ssh)
    caplog.set_level(logging.INFO, "edinbox.sources.sftp")
    async with _source(ssh.url("changing", settle="0.2", poll="1.0")) as source:
        [first] = await _collect(source, 1)  # one per receive: b.edi stays listed as settled, not read yet
        assert first.payload == b"ISA a"
        with (folder / "b.edi").open("ab") as file:  # before the next listing, a second away
            file.write(b", then more")
        assert await source.receive(max_messages=1, timeout=0.1) == []
        assert "file-changed-while-read" in caplog.text
        assert "file=b.edi" in caplog.text
        [second] = await _collect(source, 1)
        assert second.payload == b"ISA b, first, then more"
        for delivery in (first, second):
            await source.ack(delivery)


async def test_files_renamed_deleted_or_replaced_under_the_hub(
    ssh: PrivateSSH, caplog: pytest.LogCaptureFixture
) -> None:
    """After a file was read: one renamed under the hub is gone for the ack (no error) and its new name is
    delivered; one deleted is gone too; one replaced by new content is left in place by the ack and delivered again
    as a new message (another key); nothing is archived that was not read."""
    folder = ssh.folder("moved")
    for name in ("a.edi", "b.edi", "c.edi"):
        _write(folder / name, f"ISA {name}".encode(), ssh)
    caplog.set_level(logging.INFO, "edinbox.sources.sftp")
    async with _source(ssh.url("moved", **FAST)) as source:
        read = {d.payload: d for d in await _collect(source, 3)}
        (folder / "a.edi").rename(folder / "a2.edi")
        (folder / "b.edi").unlink()
        _write(folder / "c.edi", b"ISA c.edi, corrected", ssh)
        os.utime(folder / "c.edi", (time.time() + 5, time.time() + 5))
        for delivery in read.values():
            await source.ack(delivery)
        assert "file-gone" in caplog.text
        assert "file-replaced" in caplog.text
        later = {d.payload: d for d in await _collect(source, 2)}
        assert set(later) == {b"ISA a.edi", b"ISA c.edi, corrected"}
        assert later[b"ISA c.edi, corrected"].key != read[b"ISA c.edi"].key
        for delivery in later.values():
            await source.ack(delivery)
    assert sorted(p.name for p in (folder / "archive").iterdir()) == ["a2.edi", "c.edi"]


async def test_links_oversize_and_unreadable_files_are_parked_and_the_rest_goes_on(
    ssh: PrivateSSH, tmp_path: Path
) -> None:
    """A symlink (pointing out of the folder) is parked without being followed, a file over max_payload is parked
    with its first bytes and size, an unreadable one (permission denied) is parked with that reason, a dot file (an
    upload) once unchanged for dotfile_timeout, each with a .reason file beside it; an odd (non-UTF-8, control
    character) name is delivered; the good file arrives."""
    folder = ssh.folder("odd")
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"never read")
    (folder / "link.edi").symlink_to(secret)
    _write(folder / "huge.edi", b"ISA" + b"x" * 70_000, ssh)
    _write(folder / "locked.edi", b"ISA locked", ssh)
    (folder / "locked.edi").chmod(0)
    _write(folder / os.fsdecode(b"odd\xff\x01name.edi"), b"ISA odd", ssh)
    _write(folder / "good.edi", b"ISA good", ssh)
    _write(folder / ".upload.edi", b"ISA cut sh", ssh)
    async with _source(ssh.url("odd", max_payload="1000", dotfile_timeout="0.5", **FAST)) as source:
        got = await _collect(source, 6)
        refused = {d.coordinates.rsplit("/", 1)[1]: d for d in got if d.reason}
        assert sorted(d.payload for d in got if not d.reason) == [b"ISA good", b"ISA odd"]
        assert "symbolic link" in refused["link.edi"].reason
        assert refused["link.edi"].payload == b""
        assert "more than max_payload" in refused["huge.edi"].reason
        assert refused["huge.edi"].size == 70_003
        assert len(refused["huge.edi"].payload) == 64 * 1024
        assert "permission denied" in refused["locked.edi"].reason.lower()
        assert "an abandoned upload" in refused[".upload.edi"].reason
        for delivery in got:
            await source.ack(delivery)
    parked = sorted(p.name for p in (folder / "rejected").iterdir())
    names = ("huge.edi", "link.edi", "locked.edi", ".upload.edi")
    assert parked == sorted(f"{n}{s}" for n in names for s in ("", ".reason"))
    assert (folder / "rejected" / "link.edi").is_symlink()
    assert "symbolic link" in (folder / "rejected" / "link.edi.reason").read_text()


async def test_a_file_that_can_be_neither_read_nor_moved_is_skipped_with_one_log_line(
    ssh: PrivateSSH, caplog: pytest.LogCaptureFixture
) -> None:
    """In a folder the login user cannot write, an unreadable file and a symlink are each logged once as left in
    place and skipped (across several listings); the readable file next to them is delivered."""
    folder = ssh.folder("readonly")
    (folder / "link.edi").symlink_to("/etc/hostname")
    _write(folder / "locked.edi", b"ISA locked", ssh)
    (folder / "locked.edi").chmod(0)
    _write(folder / "fine.edi", b"ISA fine", ssh)
    caplog.set_level(logging.INFO, "edinbox.sources.sftp")
    source = _source(ssh.url("readonly", **FAST))
    assert isinstance(source, SftpSource)
    async with source:
        folder.chmod(0o555)
        try:
            got = await _collect(source, 1)
            assert [d.payload for d in got] == [b"ISA fine"]
            assert await source.receive(max_messages=5, timeout=0.5) == []
        finally:
            folder.chmod(0o755)
    lines = sorted(r.getMessage() for r in caplog.records if r.getMessage().startswith("cannot-park "))
    assert len(lines) == 2
    assert "file=link.edi" in lines[0]
    assert "a symbolic link" in lines[0]
    assert "file=locked.edi" in lines[1]
    assert "cannot be read: " in lines[1]
    assert all("left in place" in line for line in lines)


async def test_the_host_key_is_always_checked(ssh: PrivateSSH, tmp_path: Path) -> None:
    """A known_hosts file without the server, or with another key for it, or missing, is a ConfigurationError that
    says so; nothing turns the check off."""
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().split()[:2]
    empty, wrong = tmp_path / "empty", tmp_path / "wrong"
    empty.write_text("")
    wrong.write_text(f"[127.0.0.1]:{ssh.port} {' '.join(other)}\n")
    for known, says in ((empty, "has no key for [127.0.0.1]"), (wrong, "does not match"), (tmp_path / "nope", "")):
        url = ssh.url("keys").replace(str(ssh.root / "known_hosts"), str(known))
        with pytest.raises(ConfigurationError, match=re.escape(says or "cannot read known_hosts")):
            async with _source(url):
                pass
    with pytest.raises(ConfigurationError, match="unknown option"):
        _source(ssh.url("keys", known_hosts_check="no"))


async def test_a_server_down_is_transient_and_the_source_comes_back() -> None:
    """With the server killed, open and receive fail with a one-line SourceError (after their backoff), never a
    ConfigurationError; once it is back the same source delivers, and a held file is read again."""
    with PrivateSSH() as server:
        folder = server.folder("down")
        _write(folder / "one.edi", b"ISA one", server)
        async with _source(server.url("down", **FAST)) as source:
            [held] = await _collect(source, 1)
            server.kill()
            with pytest.raises(SourceError) as failed:
                await source.receive(max_messages=5, timeout=0.5)
            assert "\n" not in str(failed.value)
            with pytest.raises(SourceError):
                await source.ack(held)
            server.start()
            [again] = await _collect(source, 1)
            assert again.key == held.key
            await source.ack(again)
        assert (folder / "archive" / "one.edi").exists()
        server.kill()
        cold = _source(server.url("down", open_timeout="0.5"))
        with pytest.raises(SourceError, match="connecting to sftp://"):
            await cold.open()
        await cold.aclose()


async def test_a_handshake_slower_than_a_receive_goes_on_across_receives(ssh: PrivateSSH) -> None:
    """With the server not answering, each receive returns nothing within about its wait (a stopping hub is not held)
    and raises nothing; the connection attempt goes on across receives, and once the server answers the file is
    delivered: a handshake longer than a receive's wait is never cut short."""
    folder = ssh.folder("slow")
    _write(folder / "one.edi", b"ISA one", ssh)
    source = _source(ssh.url("slow", **FAST))
    ssh.pause()
    try:
        for _ in range(3):
            started = time.monotonic()
            assert await source.receive(max_messages=1, timeout=0.3) == []
            assert time.monotonic() - started < 2.0
    finally:
        ssh.resume()
    [delivery] = await _collect(source, 1)
    assert delivery.payload == b"ISA one"
    await source.ack(delivery)
    await source.aclose()


async def test_receive_waits_no_longer_than_asked_when_nothing_is_there(ssh: PrivateSSH) -> None:
    """An empty folder answers a receive within about its timeout."""
    async with _source(ssh.url("empty", **FAST)) as source:
        started = time.monotonic()
        assert await source.receive(max_messages=5, timeout=0.3) == []
        assert time.monotonic() - started < 2.0
    await asyncio.sleep(0)


async def test_an_archive_folder_removed_under_the_hub_is_an_outage_and_made_again(ssh: PrivateSSH) -> None:
    """An ack that finds the archive folder gone fails with SourceError (the file stays, nothing is lost); the next
    receive connects again, makes the folder, delivers the file again, and its ack archives it."""
    folder = ssh.folder("noarchive")
    _write(folder / "one.edi", b"ISA one", ssh)
    async with _source(ssh.url("noarchive", **FAST)) as source:
        [first] = await _collect(source, 1)
        (folder / "archive").rmdir()
        with pytest.raises(SourceError, match="archive is gone"):
            await source.ack(first)
        assert (folder / "one.edi").exists()
        [again] = await _collect(source, 1)
        assert again.key == first.key
        await source.ack(again)
    assert [p.name for p in (folder / "archive").iterdir()] == ["one.edi"]


async def test_a_missing_remote_folder_is_an_outage_not_a_configuration_error(ssh: PrivateSSH) -> None:
    """A source whose folder is not on the server fails to open with a SourceError naming it (waited out by the hub),
    and opens once the folder is there."""
    url = ssh.url("later", open_timeout="0.3")
    ssh.folder("later").rmdir()
    source = _source(url)
    with pytest.raises(SourceError, match="the remote folder is not there"):
        await source.open()
    ssh.folder("later")
    async with source:
        assert await source.receive(max_messages=1, timeout=0.1) == []


async def test_folders_the_user_may_not_create_are_a_configuration_error(ssh: PrivateSSH) -> None:
    """A folder where the login user may not create archive/ (nor rejected/) refuses to open with a
    ConfigurationError that says what to do, at once (no backoff): waiting cannot fix it."""
    url = ssh.url("shut")
    ssh.folder("shut").chmod(0o555)
    try:
        started = time.monotonic()
        with pytest.raises(ConfigurationError, match=r"may not create the folder .*archive= and rejected="):
            await _source(url).open()
        assert time.monotonic() - started < 5
    finally:
        ssh.folder("shut").chmod(0o755)


def test_a_file_is_ready_after_two_listings_a_settle_time_apart_and_held_until_settled() -> None:
    """The listing's rule without a server: one listing is not enough, nor two closer than the settle time; a change
    starts the wait again; a held file is not ready; a skipped file is ready again once it changes; a nack's delay
    holds it back until then."""
    listing = Listing(settle=2.0, claim_timeout=100.0)
    listing.update([(b"a", 10, 100)], now=0.0)
    assert listing.ready(now=5.0) == []
    listing.update([(b"a", 10, 100)], now=1.0)
    assert listing.ready(now=1.0) == []
    assert listing.ready(now=2.0) == [b"a"]
    listing.update([(b"a", 11, 101)], now=3.0)
    listing.update([(b"a", 11, 101)], now=4.0)
    assert listing.ready(now=4.0) == []
    assert listing.ready(now=5.0) == [b"a"]
    listing.hold(b"a", now=5.0)
    assert listing.ready(now=6.0) == []
    assert listing.ready(now=105.0) == [b"a"]  # never settled: handed out again after claim_timeout
    listing.give_back(b"a", not_before=8.0)
    assert listing.ready(now=7.0) == []
    assert listing.ready(now=8.0) == [b"a"]
    listing.skipped[b"a"] = (11, 101)
    assert listing.ready(now=9.0) == []
    listing.update([(b"a", 12, 102)], now=10.0)
    listing.update([(b"a", 12, 102)], now=12.0)
    assert listing.ready(now=12.0) == [b"a"]
    listing.update([], now=13.0)
    assert listing.seen == {}


async def test_a_refused_login_is_a_configuration_error_and_the_password_is_never_shown(
    ssh: PrivateSSH, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A key the server does not know and a password it does not take are a ConfigurationError at once (no backoff),
    and the password appears neither in the error nor in any log line, asyncssh's at DEBUG included."""
    password = "p@s/ :w0rd"
    stranger = tmp_path / "stranger"
    stranger.write_bytes(asyncssh.generate_private_key("ssh-ed25519").export_private_key())
    url = ssh.url("login").replace(str(ssh.root / "userkey"), str(stranger))
    url = url.replace(f"{ssh.user.pw_name}@", f"{ssh.user.pw_name}:{quote(password, safe='')}@")
    caplog.set_level(logging.DEBUG)
    started = time.monotonic()
    with pytest.raises(ConfigurationError, match="refused the user, key or password") as refused:
        await _source(url).open()
    assert time.monotonic() - started < 5
    for text in (str(refused.value), caplog.text):
        assert password not in text
        assert quote(password, safe="") not in text
