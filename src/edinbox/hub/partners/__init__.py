"""The hub's partners: who gets in (the registry), the control numbers they send (the ledger), the
answers they get (acknowledgments in the outbox), and the AS2 agreements and receipts.
"""

from edinbox.hub.partners._acks import KINDS, REJECTION, Acknowledger, Pending, delivery_id, partner_key
from edinbox.hub.partners._as2 import Receipts, partners
from edinbox.hub.partners._ledger import (
    LEVELS,
    Arrival,
    Gauges,
    Ledger,
    controls,
    findings,
    normalise,
    read,
    record,
    report,
)
from edinbox.hub.partners._registry import COUNTER, Refusal, doctor_check, noticed, refusal, report_to

__all__ = [
    "COUNTER",
    "KINDS",
    "LEVELS",
    "REJECTION",
    "Acknowledger",
    "Arrival",
    "Gauges",
    "Ledger",
    "Pending",
    "Receipts",
    "Refusal",
    "controls",
    "delivery_id",
    "doctor_check",
    "findings",
    "normalise",
    "noticed",
    "partner_key",
    "partners",
    "read",
    "record",
    "refusal",
    "report",
    "report_to",
]
