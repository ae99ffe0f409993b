"""`python -m edinbox.cli`: the `edinbox` command."""

from edinbox.cli import main

main()
