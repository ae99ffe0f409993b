"""`edinbox publish FILE... --to URL`: files go to a real broker with the producer id set."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis.asyncio as redis_asyncio
from click.testing import CliRunner

from edinbox import ConfigurationError
from edinbox.cli import main
from edinbox.hub.ops._publish import interchange_id, split_files
from services import require_service


def isa(control: str, *, sender: str = "ACME") -> bytes:
    """One small X12 810 interchange with the given control number (ISA13)."""
    head = (
        f"ISA*00*{'':10}*00*{'':10}*ZZ*{sender:<15}*ZZ*{'HUB':<15}*261202*1030*U*00401*{control}*0*T*>~"
        f"GS*IN*{sender}*HUB*20261202*1030*1*X*004010~"
    )
    body = "ST*810*0001~BIG*20261202*INV-1~TDS*10000~SE*4*0001~"
    return (head + body + f"GE*1*1~IEA*1*{control}~\n").encode()


def _entries(stream: str) -> list[tuple[str, bytes]]:
    async def read() -> list[tuple[str, bytes]]:
        client = redis_asyncio.Redis.from_url("redis://127.0.0.1:6379/0")
        try:
            entries = await client.xrange(stream)
            return [(f[b"message_id"].decode(), f[b"payload"]) for _, f in entries]
        finally:
            await client.delete(stream)
            await client.aclose()

    return asyncio.run(read())


def test_publish_raw_files_keyed_by_file_name(tmp_path: Path, unique_name: str) -> None:
    """With --raw each file is one message whose producer id is its file name."""
    require_service("redis")
    (tmp_path / "a.txt").write_bytes(b"first")
    (tmp_path / "b.txt").write_bytes(b"second")
    url = f"redis://127.0.0.1:6379/0?stream={unique_name}"
    result = CliRunner().invoke(
        main, ["publish", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), "--raw", "--to", url]
    )
    assert result.exit_code == 0, result.output
    assert "published 2 message(s) from 2 file(s)" in result.output
    assert _entries(unique_name) == [("a.txt", b"first"), ("b.txt", b"second")]


def test_publish_bad_url_masks_password_and_sends_nothing(tmp_path: Path) -> None:
    """An invalid --to URL is a clean error with the password masked."""
    (tmp_path / "a.txt").write_bytes(b"x")
    result = CliRunner().invoke(
        main, ["publish", str(tmp_path / "a.txt"), "--raw", "--to", "redis://:s3cret@127.0.0.1/0?stream=s&nope=1"]
    )
    assert result.exit_code != 0
    assert "nope" in result.output
    assert "s3cret" not in result.output


def test_publish_splits_interchanges_keyed_by_interchange_key(tmp_path: Path, unique_name: str) -> None:
    """A file of two interchanges becomes two messages, each keyed `source/control number` and holding its bytes."""
    require_service("redis")
    from edinbox import edi

    data = isa("000000905") + isa("000000906")
    (tmp_path / "two.x12").write_bytes(data)
    url = f"redis://127.0.0.1:6379/0?stream={unique_name}"
    result = CliRunner().invoke(main, ["publish", str(tmp_path / "two.x12"), "--to", url])
    assert result.exit_code == 0, result.output
    sent = _entries(unique_name)
    expected = [interchange_id(interchange.message()) for interchange in edi.parse(data)]
    assert [message_id for message_id, _ in sent] == expected
    assert [message_id.rsplit("/", 1)[1] for message_id, _ in sent] == ["000000905", "000000906"]
    assert b"".join(payload for _, payload in sent).strip() == data.strip()
    assert [edi.parse(payload)[0].message().key for _, payload in sent] == [i.message().key for i in edi.parse(data)]


def test_publish_refuses_a_file_that_is_not_edi(tmp_path: Path) -> None:
    """A file that does not parse stops the publish before anything is sent, naming the file."""
    (tmp_path / "junk.edi").write_bytes(b"this is not EDI")
    with pytest.raises(ConfigurationError, match=r"junk\.edi"):
        split_files([tmp_path / "junk.edi"])
