"""The retrievers and their evaluation: dense (exact search), ColBERT (MaxSim, PLAID), shards, caches, metrics."""
