"""`edinbox_stats`, `edinbox_purge`."""
