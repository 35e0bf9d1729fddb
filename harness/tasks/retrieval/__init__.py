"""Retrieval (task=beir, nanobeir, code, mldr, colbert): dense (DPR) and multi-vector (ColBERT), planned and computed."""
