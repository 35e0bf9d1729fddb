"""What a task is, as pure data (names, labels, published rows): read by the leaderboard, ``harness.select`` and
the families alike. Nothing here imports torch, transformers or any compute module."""
