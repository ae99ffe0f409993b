"""The `edinbox` command: the EDI hub and the operator's commands (`main`, a click group).

`_main` declares the commands, `_commands` how every command takes its options and settings, `_ledger` and `_store`
the ledger's and the message store's commands.
"""

from edinbox.cli._main import main

__all__ = ["main"]
