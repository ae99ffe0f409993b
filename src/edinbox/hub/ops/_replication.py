"""`edinbox doctor`'s view of the journal's replication: what a failover of its PostgreSQL server can lose.

The hub acks a delivery once its transaction commits. With asynchronous replication a commit the primary
acknowledged may not have reached the standby when the primary is lost: promoted, the standby lacks it, and the
broker will not redeliver it (docs/scaling.md, "PostgreSQL high availability"). The check reads, on the server the
hub writes to, `pg_stat_replication` (one row per streaming standby and its `sync_state`) and the settings a commit
waits by (`synchronous_standby_names`, `synchronous_commit`). A role that may see the rows but not their details
(without `pg_read_all_stats`) gets "unknown", as a warning, never a failure. A managed service's storage-level
replication (RDS Multi-AZ instances) has no rows there: nothing is said about it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from edinbox._async_inbox import AsyncInbox
from edinbox._errors import InboxError
from edinbox._urls import mask

__all__ = ["replication"]

_NOT_WAITING = ("off", "local")
"""`synchronous_commit` values that let a commit return before any standby has it."""


async def replication(inbox: AsyncInbox) -> tuple[str, str] | None:
    """("ok" | "warn", a sentence) on the journal's replication; None for a database without replicas to read
    (SQLite, MariaDB: their `hub_replication` finds no row)."""
    try:
        rows = await inbox.read(lambda tx: tx.unit.fetch("hub_replication", {}))
    except InboxError as exc:
        return "warn", f"unknown: cannot read the replication state: {mask(str(exc))}"
    if not rows:
        return None
    standby, names, commit, states = rows[0]
    return judge(bool(standby), str(names or ""), str(commit or ""), list(states or []))


def judge(standby: bool, names: str, commit: str, states: Sequence[Any]) -> tuple[str, str]:
    """The verdict on one server: a standby itself, its standbys' `states` (`sync_state` per streaming standby, None
    where the role may not see it), `names` (`synchronous_standby_names`) and `commit` (`synchronous_commit`)."""
    if standby:
        return "warn", (
            "this server is a standby (read-only): point the URL at the primary, or list every server with "
            "target_session_attrs=read-write"
        )
    if not states:
        if names.strip():
            return "warn", (
                f"synchronous_standby_names is {names!r} but no standby streams from this server: commits wait "
                "until one connects"
            )
        return "ok", "no standby streams from this server (a managed service's storage replication is not seen)"
    if any(state is None for state in states):
        return "warn", (
            f"unknown: {len(states)} standby(s) stream from this server, and this role may not read their sync "
            "state (grant it pg_read_all_stats)"
        )
    lost = "can lose commits the hub acknowledged (docs/scaling.md, PostgreSQL high availability)"
    if not names.strip() or commit in _NOT_WAITING:
        why = "synchronous_standby_names is empty" if not names.strip() else f"synchronous_commit is {commit}"
        return "warn", f"{len(states)} standby(s) replicate asynchronously ({why}): a failover {lost}"
    if "async" in states:
        waits = sum(state in ("sync", "quorum") for state in states)
        return "warn", (
            f"{list(states).count('async')} of {len(states)} standby(s) replicate asynchronously ({waits} "
            f"synchronously): a failover to an asynchronous one {lost}"
        )
    return "ok", f"{len(states)} standby(s) replicate synchronously (synchronous_commit {commit})"
