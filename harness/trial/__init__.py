"""A one-command trial of the paper graph on toy data (``python -m harness.trial``, ``scripts/paper-trial.sh``)."""
