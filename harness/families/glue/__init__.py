"""``task=glue``: the paper's GLUE sweeps: plan the grid, skip finished points, fine-tune, write one record each.

The package reads as the pipeline, one module per job:

- :mod:`.grid`: ``task.*`` settings and the grid points they imply, in run order (pure);
- :mod:`.chain`: which encoder a point starts from: pretrained, ``task.init_from``, or an MNLI record's kept
  checkpoint for the tasks the spec's ``depends_on`` chains from MNLI (``task.scoring_protocol``: the best record's restored best
  weights, or the first seed's final weights of the best configuration; records only);
- :mod:`.point`: one point's data, tokenisation cache, fine-tuning and evaluation (compute, imported lazily);
- :mod:`.family`: :class:`GlueFamily` plans every point as a cell (MNLI and the tasks that do not chain first,
  the chained ones once MNLI's records exist); a point with an ok record is skipped unless ``overwrite=true``;
  the others load every task's data first (a missing file or an offline hub fails before any training), then
  train in order.

What GLUE *is* (tasks, labels, score definitions, Table 5) lives in :mod:`harness.specs.glue`; its selection rule
is :class:`harness.selection.rules.GlueSelection`. Under a Hydra multirun every job is one grid point; the GLUE
sweep configs make each task one batch (one SLURM array), MNLI first, and
:class:`harness.hydra_callbacks.StagingCheck` refuses a sweep whose batches would start a chained task before MNLI
has finished.
"""

from __future__ import annotations

from harness.families.glue.family import GlueFamily

__all__ = ["GlueFamily"]
