"""The test project's app: one model the handlers create."""
