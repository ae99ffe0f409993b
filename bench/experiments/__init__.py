"""Journal layouts measured by bench/journal_scale.py and not adopted (README.md beside this file)."""
