"""A small Django project for the Django integration's tests (PostgreSQL, a schema of its own per run)."""
