"""The spool folder keeps the same source contract as the brokers."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import pytest

from edinbox.testing.contract import SourceContract


class TestSpool(SourceContract):
    """dir:///path: claims by atomic rename, ack to archive/, reject to rejected/, dead claimers recovered."""

    redelivery_wait = 3.0
    quiet = 0.5

    @pytest.fixture
    def url(self, tmp_path: Path) -> str:
        """A fresh spool folder."""
        return f"dir://{tmp_path / 'spool'}"

    async def dead_letters(self, url: str) -> list[tuple[str | None, bytes]]:
        """The parked files in rejected/ (each with its .reason beside it), keyed by their producer id."""
        rejected = Path(url.removeprefix("dir://")) / "rejected"
        out: list[tuple[str | None, bytes]] = []
        for path in sorted(rejected.iterdir()):
            if path.name.endswith(".reason"):
                continue
            assert (rejected / f"{path.name}.reason").exists()
            name = path.name.split("#", 1)[0]
            message_id = unquote(name.split("~", 1)[1].removesuffix(".edi")) if "~" in name else None
            out.append((message_id, path.read_bytes()))
        return out
