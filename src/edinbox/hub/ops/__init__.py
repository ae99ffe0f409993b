"""The operator's commands as plain values: counts, parked messages, the journal's schema, re-drive,
the message store's search and export, `doctor`, and how they are printed.
"""

from edinbox.hub.ops._doctor import Check, doctor
from edinbox.hub.ops._ops import (
    Found,
    drop_schema,
    find,
    forget,
    init,
    list_rows,
    migrate,
    migration_summary,
    purge,
    relay,
    render_shown,
    requeue,
    show,
    split_key,
    stats,
    timestamp,
    write_payload,
)
from edinbox.hub.ops._output import render
from edinbox.hub.ops._publish import send, split_files
from edinbox.hub.ops._redrive import join_key, replay
from edinbox.hub.ops._store import export, search

__all__ = [
    "Check",
    "Found",
    "doctor",
    "drop_schema",
    "export",
    "find",
    "forget",
    "init",
    "join_key",
    "list_rows",
    "migrate",
    "migration_summary",
    "purge",
    "relay",
    "render",
    "render_shown",
    "replay",
    "requeue",
    "search",
    "send",
    "show",
    "split_files",
    "split_key",
    "stats",
    "timestamp",
    "write_payload",
]
