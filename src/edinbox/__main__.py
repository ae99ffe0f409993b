"""`python -m edinbox`: the `edinbox` command."""

from edinbox.cli import main

main()
