"""`edinbox chaos`: proves that a setup (a source, a database) keeps the promise, every invoice once,
with bad deliveries mixed into good traffic and the hub killed at its fault points.
"""

from edinbox.hub.chaos._run import run_chaos

__all__ = ["run_chaos"]
