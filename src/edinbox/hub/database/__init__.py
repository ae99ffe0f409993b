"""The hub's database: the journal a `HubConfig` names (opened and checked complete), the hub's own
tables beside it, the purge that keeps both within their retention, and the indexing of the kept payloads for
search between batches.
"""

from edinbox.hub.database._findings import (
    compact_findings,
    describe_finding,
    findings_lines,
    findings_summary,
    read_findings,
    record_findings,
)
from edinbox.hub.database._journal import HUB, on_inbox, open_inbox, verify, verify_found
from edinbox.hub.database._purge import Purged, Purger, check_purge, purge, purgeable, purges
from edinbox.hub.database._tables import (
    COUNTED,
    SHARDS,
    TABLES,
    Parked,
    count,
    counts,
    create_partner_index,
    has_hub,
    park,
    park_reasons,
)

__all__ = [
    "COUNTED",
    "HUB",
    "SHARDS",
    "TABLES",
    "Parked",
    "Purged",
    "Purger",
    "check_purge",
    "compact_findings",
    "count",
    "counts",
    "create_partner_index",
    "describe_finding",
    "findings_lines",
    "findings_summary",
    "has_hub",
    "on_inbox",
    "open_inbox",
    "park",
    "park_reasons",
    "purge",
    "purgeable",
    "purges",
    "read_findings",
    "record_findings",
    "verify",
    "verify_found",
]
