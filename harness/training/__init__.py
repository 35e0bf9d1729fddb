"""Fine-tuning machinery the protocols share: typed training nodes, trainer arguments, N processes, trackers."""
