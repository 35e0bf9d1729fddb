"""Adapters that run a peer (mteb) on exactly the data the harness evaluates, for parity checks and benchmarks."""
