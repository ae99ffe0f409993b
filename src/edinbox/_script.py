"""The `edinbox` command's entry point: the command line when its extra is installed, else one line saying how.

The command (the hub, the operator commands) needs click and pydantic-settings, the `cli` extra; the library
(`Inbox`, `AsyncInbox`, `consume`) needs neither, so a library-only install stays small.
"""

from __future__ import annotations

import sys

__all__ = ["main"]

_NEEDS = ("click", "pydantic_settings")


def main() -> None:
    """Run `edinbox.cli.main`, or exit 2 with one line naming the extra when a module it needs is missing."""
    for module in _NEEDS:
        try:
            __import__(module)
        except ImportError:
            sys.stderr.write(f"edinbox: the command needs {module}: pip install 'edinbox[cli]'\n")
            raise SystemExit(2) from None
    from edinbox.cli import main as command

    command()
