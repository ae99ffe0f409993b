"""Spool file names and claim owners: which names the spool uses as they are, how others are shown and parked.

A name is used as it is when it is valid UTF-8, has no control characters or line separators, does not start with
`.` and its base (without the `#<count>` of a redelivery) fits in 230 bytes: room is left for `#<count>`, a
`.<random>` suffix and `.reason` within the usual 255-byte limit. Other names are parked under a generated name.
"""

from __future__ import annotations

import os
import re
import time
import uuid

__all__ = ["MAX_NAME", "name_problem", "owner_dead", "owner_id", "parked_name", "safe", "shown", "split_count"]

MAX_NAME = 230
"""The longest base name (in UTF-8 bytes) the spool claims as it is."""


def split_count(name: str) -> tuple[str, int]:
    """`<name>#<count>` as (name, count): a redelivered file carries its delivery count in its name (1 without one).

    The count is the digits after the last `#`, when there are only digits after it; a plain string split (a lazy
    regular expression for it backtracked over the whole name: 16 us a name, three times per delivery).
    """
    base, sign, count = name.rpartition("#")
    if sign and count.isdecimal():
        return base, int(count)
    return name, 1


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def safe(text: str) -> str:
    """`text` with every character but letters, digits, `_`, `.` and `-` replaced by `_`."""
    return _UNSAFE.sub("_", text)


def name_problem(name: str) -> str:
    """Why a file name in `inbound/` cannot be used as it is; empty when it can."""
    if name.startswith("."):
        return "a hidden (dot) file"
    try:
        encoded = name.encode()
    except UnicodeEncodeError:
        return "the file name is not valid UTF-8"
    if _CONTROL.search(name):
        return "the file name contains control characters"
    base, _ = split_count(name)
    if len(base.encode()) > MAX_NAME or len(encoded) > MAX_NAME + 10:
        return f"the file name is longer than {MAX_NAME} bytes"
    return ""


def shown(name: str) -> str:
    """The name on one printable line: control characters and bytes that are not UTF-8 escaped as `\\xNN`."""
    out = []
    for char in name:
        code = ord(char)
        if char == "\\":
            out.append("\\\\")
        elif 0xDC80 <= code <= 0xDCFF:  # an undecodable byte, as os.fsdecode keeps it
            out.append(f"\\x{code - 0xDC00:02x}")
        elif _CONTROL.match(char):
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out)


def parked_name(name: str) -> str:
    """A generated, unique, harmless name under which a file with an unusable name is parked."""
    hint = safe(name.lstrip("."))[:60]
    return f"refused-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}" + (f"-{hint}" if hint else "")


def _start_time(pid: int) -> str:
    """The start time of process `pid` in clock ticks since boot (Linux /proc), or '' when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[-1].split()
    except OSError:
        return ""
    return fields[19].decode() if len(fields) > 19 else ""


def owner_id(pid: int) -> str:
    """This process in a claim folder's name: `<pid>.<start time>`, or `<pid>` where start times cannot be read."""
    start = _start_time(pid)
    return f"{pid}.{start}" if start else str(pid)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owner_dead(owner: str) -> bool:
    """True when the process an `owner_id` names (on this host) is gone, or its pid now names another process."""
    pid, _, start = owner.partition(".")
    if not pid.isdigit():
        return False
    if not _pid_alive(int(pid)):
        return True
    now = _start_time(int(pid)) if start else ""
    return bool(now) and now != start
