"""Running one composed config: the command line's checks, plan(cfg), the one loop, locks and preflight checks."""
