"""A row spread over many runs: shards of one split, gangs, on this host or on Ray (#23, #31)."""
