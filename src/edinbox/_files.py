"""Small files an operator names (a settings file, a token file): read only when they are regular files."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from edinbox._errors import ConfigurationError

__all__ = ["read_small"]


def read_small(path: Path | str, *, what: str, limit: int) -> bytes:
    """At most `limit + 1` bytes of the file `path` (so the caller can refuse one over `limit`): a FIFO or a device
    is refused without being opened, so nothing blocks, and checked again once open; a ConfigurationError naming
    `what` ("configuration", "token file"...) for that or a file that cannot be read."""
    path = Path(path)
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise ConfigurationError(f"the {what} {path} is not a regular file")
        with path.open("rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):  # swapped since the look above
                raise ConfigurationError(f"the {what} {path} is not a regular file")
            return file.read(limit + 1)
    except OSError as exc:
        raise ConfigurationError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None
