"""A training run's checkpoints as one series: ``python -m harness.series``.

discover.py (which folders are checkpoints, at which step; a checkpoint still being written is never read),
settings.py (the command line, checked), plan.py (each checkpoint's run per task, planned as the runner
plans it; the ``series`` config key the records carry), show.py (the plan, its cost, the series table),
launch.py (here, one after another, or one SLURM array per checkpoint), __main__.py (the command and ``--watch``);
the selected step handed to the next stage is :mod:`harness.selection.series`'s.
"""
