"""`edinbox doctor`: what an operator checks before trusting a hub, each check one line (ok, warn or fail) with what
to do: connectivity, the journal's schema and unique key, the hub's tables, the replication, the purge, the dead
letters and the partners."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from edinbox._async_inbox import AsyncInbox
from edinbox._errors import InboxError
from edinbox._urls import mask
from edinbox.hub.config import HubConfig, duration_text
from edinbox.hub.database import (
    has_hub,
    purgeable,
    verify_found,
)
from edinbox.hub.ops._output import human_duration
from edinbox.hub.ops._replication import replication
from edinbox.hub.partners import doctor_check

__all__ = ["Check", "doctor"]


@dataclass(frozen=True, slots=True)
class Check:
    """One line of `edinbox doctor`."""

    name: str
    status: str
    """"ok", "warn" or "fail"."""
    detail: str


async def _purge_check(inbox: AsyncInbox, config: HubConfig) -> Check:
    """A warning when the journal holds settled rows older than the retention: the purge is off or behind."""
    keep = human_duration(config.retention)
    every = f"every {duration_text(config.purge_every)}" if config.purge_every else "off"
    try:
        old = await purgeable(inbox, config.consumer, config.retention)
    except InboxError as exc:
        return Check("purge", "warn", f"cannot count the rows older than the retention: {mask(str(exc))}")
    if old:
        detail = f"{old} settled rows are older than the retention {keep} (run purges {every}): run `edinbox purge`"
        return Check("purge", "warn", detail)
    return Check("purge", "ok", f"no settled row is older than the retention {keep} (run purges {every})")


def _dead_letters_check(config: HubConfig) -> Check:
    """Whether messages parked DEAD can go to `dead_letters`: its driver installed (the URL was checked with the
    settings) and a relay to send them (checked without connecting: doctor writes nothing, not even a queue)."""
    from edinbox._extras import require

    where = mask(config.dead_letters)
    try:
        require(config.dead_letters)
    except InboxError as exc:
        return Check("dead letters", "fail", mask(str(exc)))
    relayed = "relayed by `run`" if config.relay else "relayed by `edinbox relay` (run has relay off)"
    return Check("dead letters", "ok", f"each message parked DEAD is also published to {where}, {relayed}")


async def doctor(inbox: AsyncInbox, *, config: HubConfig) -> list[Check]:
    """Check connectivity, the journal schema and unique key, the hub's tables and invoice key where `edinbox init`
    made them (a library journal has none: said, not failed), the journal's replication (`_replication`: what a
    failover can lose), who gets into a hub (`_partners`), and retention against the horizon."""
    checks: list[Check] = []
    try:
        hub = await has_hub(inbox)
        checks.append(Check("database", "ok", f"connected to {mask(config.db)}"))
    except InboxError as exc:
        checks.append(Check("database", "fail", mask(str(exc))))
        return checks
    if hub:
        keys = await inbox.unique_keys("edinbox_hub_invoices")
        if keys is not None and ["issue_date", "kind", "number", "seller"] in keys:
            checks.append(Check("invoice key", "ok", "invoices unique on (seller, number, kind, issue_date)"))
        else:
            detail = "invoices lack their unique key (seller, number, kind, issue_date): run `edinbox init`"
            checks.append(Check("invoice key", "fail", detail))
    else:
        checks.append(Check("hub", "ok", "library journal, no hub tables: the journal and its outbox only"))
    try:
        await verify_found(inbox)
        checks.append(Check("journal", "ok", f"table {config.table}: schema version and unique key present"))
    except InboxError as exc:
        checks.append(Check("journal", "fail", mask(str(exc))))
    else:
        checks.append(await _purge_check(inbox, config))
    if (replicated := await replication(inbox)) is not None:
        checks.append(Check("replication", *replicated))
    source_horizon: timedelta | None = None
    if config.source:
        from edinbox.sources import reach

        try:
            source_horizon = await reach(config.source, consumer=config.consumer)
            checks.append(Check("source", "ok", f"reached {mask(config.source)}"))
        except InboxError as exc:
            checks.append(Check("source", "fail", mask(str(exc))))
    if hub:  # who gets into the hub: a library journal's application decides that itself
        checks.append(Check("partners", *doctor_check(config)))
    if config.dead_letters:
        checks.append(_dead_letters_check(config))
    keep, limit = config.retention, config.horizon
    if source_horizon is not None:
        limit = max(limit, source_horizon)
    if keep < limit:
        detail = f"retention {human_duration(keep)} is shorter than the redelivery horizon {human_duration(limit)}"
        checks.append(Check("retention", "fail", detail))
    else:
        checks.append(
            Check("retention", "ok", f"retention {human_duration(keep)} >= redelivery horizon {human_duration(limit)}")
        )
    return checks
