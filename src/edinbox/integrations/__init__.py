"""Integrations with other frameworks (FastStream)."""
