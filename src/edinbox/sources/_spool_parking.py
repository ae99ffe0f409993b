"""Parking a spool file: moved to `rejected/` beside a `.reason` file saying why, its original name, when and for which
consumer, and handed to the hub as a refused delivery (`Parked`: nothing is left to settle)."""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from edinbox._logs import log_event
from edinbox.sources._base import Delivery
from edinbox.sources._spool_files import free_name, head, why, write_atomically
from edinbox.sources._spool_folders import Folders
from edinbox.sources._spool_names import name_problem, parked_name, shown, split_count

__all__ = ["Parked", "park", "write_reason"]

_log = logging.getLogger("edinbox.sources.spool")


@dataclass(frozen=True, slots=True)
class Parked:
    """A file the source parked in `rejected/` itself: nothing is left to settle."""

    name: str


def park(
    folder: int, name: str, problem: str, *, into: Folders, root: Path, consumer: str, skipped: set[str]
) -> Delivery | None:
    """Move `name` in `folder` (a claim, or in inbound/ when it cannot be claimed) to `rejected/` with its reason,
    and return it as a refused delivery.

    None when another process took it first; a file that cannot be moved at all is logged once and skipped.
    """
    rejected = into["rejected"]
    odd = name_problem(name)
    base = split_count(name)[0] if not odd else name
    target = free_name(rejected, parked_name(name) if odd else base)
    reason = problem if not odd or problem.startswith(odd) else f"{odd}; {problem}"
    reason = f"{reason}: '{shown(name)}'" if odd else reason
    try:
        write_reason(into, target, reason, consumer=consumer, original=name)
        try:
            os.rename(name, target, src_dir_fd=folder, dst_dir_fd=rejected)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(f"{target}.reason", dir_fd=rejected)
            raise
    except FileNotFoundError:
        return None
    except OSError as exc:
        skipped.add(name)
        with contextlib.suppress(OSError):  # a claim: recovered (and parked again) once claim_timeout old
            os.utime(name, dir_fd=folder, follow_symlinks=False)
        problem_text = f"{reason}: {why(exc)}"
        fields = {
            "spool": root,
            "file": shown(name),
            "error": problem_text,
            "then": "it stays in place, a claim is tried again after claim_timeout",
        }
        log_event(_log, logging.WARNING, "cannot-park", fields)
        return None
    first, size = head(rejected, target)
    return Delivery(
        first,
        message_id=None,
        coordinates=f"dir:rejected/{target}",
        source=f"dir:{root.name}",
        handle=Parked(target),
        reason=reason,
        size=size if size is not None and size > len(first) else None,
    )


def write_reason(into: Folders, target: str, reason: str, *, consumer: str, original: str | None = None) -> None:
    """Write `target`'s `.reason` file in `rejected/`: the reason, the original name, when, and for which consumer."""
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    lines = [reason.replace("\n", " ")]
    if original is not None:
        lines.append(f"original-name: {shown(original)}")
    lines += [f"rejected-at: {stamp}", f"consumer: {shown(consumer)}", ""]
    data = "\n".join(lines).encode(errors="backslashreplace")
    write_atomically(into["tmp"], into["rejected"], f"{target}.reason", data)
