"""Is a difference real? Paired significance between two runs on the same queries (issue 33)."""
