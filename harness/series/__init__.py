"""A training run's checkpoints as one series: ``python -m harness.series`` (its modules: docs/layout.md); the
selected step handed to the next stage is :mod:`harness.selection.series`'s."""
