"""Retrieval data: catalog entries and their kinds (BEIR, MLDR, CoIR, code), training rows (triplets, KD)."""
