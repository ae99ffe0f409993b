"""Management commands of edinbox."""
