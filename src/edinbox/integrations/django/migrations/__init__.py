"""The journal table's migrations."""
