"""A training run's checkpoints as one series (``python -m harness.series``): planned, run and shown as a graph."""
