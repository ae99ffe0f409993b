"""`python -m edinbox`: the `edinbox` command."""

from edinbox._script import main

main()
