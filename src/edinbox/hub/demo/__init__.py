"""`edinbox demo`: generated partner traffic through real hub processes and real crashes. The
accounting service it posts to is `python -m edinbox.hub.demo.accounting_service` (a program of its own, not
imported here).
"""

from edinbox.hub.demo._demo import run_demo
from edinbox.hub.demo._traffic import PARTNERS, Doc, generate, render

__all__ = ["PARTNERS", "Doc", "generate", "render", "run_demo"]
