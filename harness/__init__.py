"""Evaluate BERT-style encoders downstream, exactly as the ModernBERT paper measured its baselines."""

__version__ = "0.1.0"
