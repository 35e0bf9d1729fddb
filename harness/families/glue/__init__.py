"""``task=glue``: the paper's GLUE sweeps: plan the grid, skip finished points, fine-tune, write one record each.

The package reads as the pipeline:

- :mod:`.grid`: ``task.*`` settings and the grid points they imply, in run order (pure);
- :mod:`.chain`: which encoder a point starts from: pretrained, ``task.init_from``, or an MNLI record's kept
  checkpoint for the tasks the spec's ``depends_on`` chains from MNLI (``task.scoring_protocol``: the best record's restored best
  weights, or the first seed's final weights of the best configuration; records only);
- here, :class:`GlueFamily` plans every point as a cell (MNLI and the tasks that do not chain first, the chained
  ones once MNLI's records exist); a point with an ok record is skipped unless ``overwrite=true``; the others
  (:mod:`harness.stages.glue`: one point's data, tokenisation cache, fine-tuning and evaluation) load every task's
  data first (a missing file or an offline hub fails before any training), then train in order, and after an
  in-process sweep the selection is written.

What GLUE *is* (tasks, labels, score definitions, Table 5) lives in :mod:`harness.specs.glue`; its selection rule
is :class:`harness.selection.rules.GlueSelection`. Under a Hydra multirun every job is one grid point; the GLUE
sweep configs make each task one batch (one SLURM array), MNLI first, and
:class:`harness.hydra_callbacks.StagingCheck` refuses a sweep whose batches would start a chained task before MNLI
has finished.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from functools import cached_property
from typing import Any, ClassVar

from harness import results
from harness.data import glue as glue_data
from harness.errors import HarnessError
from harness.families.base import Family
from harness.families.glue.chain import resolve_init
from harness.families.glue.grid import GlueSettings, epoch_values, order_tasks, plan, seeds
from harness.runplan import Cell, RunPlan
from harness.specs import dependencies, stages
from harness.stages import check_model
from harness.stages.context import InitSource
from harness.work import Work, cost_data

#: the stage a point that starts from another run's weights computes beyond the spec's (harness/specs/stages.py)
CHAIN_STAGE = "load.chain"


class GlueFamily(Family):
    """``task=glue``: one cell per (grid point, GLUE task); RTE/MRPC/STS-B planned after MNLI has run."""

    settings_class = GlueSettings
    root_exclude: ClassVar[Mapping[str, str]] = {
        "seed": "GLUE's seed is task.seed (which defaults to it), replaced by each grid point's seed",
    }

    @cached_property
    def tasks(self) -> list[glue_data.GlueTask]:
        s = self.settings
        from harness.glue_scores import SCORE_KEYS

        defs = glue_data.task_definitions(s.definitions, SCORE_KEYS)
        return order_tasks(glue_data.select_tasks(s.tasks, defs), self.chain)

    @cached_property
    def chain(self) -> dict[str, tuple[str, ...]]:
        """Which tasks start from which run (the spec's ``depends_on``, unless ``task.mnli_init=off``)."""
        return dependencies.chained(self.task_spec, self.settings)

    def rounds(self) -> list[Callable[[], list[Cell]]]:
        """MNLI and the tasks that do not chain first; the chained ones once MNLI's records exist."""
        chained = set(self.chain)
        groups = [[t for t in self.tasks if t.name not in chained], [t for t in self.tasks if t.name in chained]]
        return [functools.partial(self.cells_for, group) for group in groups if group]

    def cells(self) -> list[Cell]:
        return [c for cells in self.rounds() for c in cells()]

    def cells_for(self, tasks: Sequence[glue_data.GlueTask]) -> list[Cell]:
        s = self.settings
        data = {t.name: glue_data.data_fingerprint(t, s.data_dir, s.hub.path, s.hub.revision) for t in tasks}
        # the head this model fine-tunes with (model.glue), where it sets one: runs of a model without one keep the ids
        # they had before heads were configurable
        head = {} if self.spec.glue is None else {"task.head": asdict(self.spec.glue)}
        out = []
        for point in plan(tasks, s, int(self.cfg.seed)):
            init = resolve_init(point.task, s, str(self.cfg.paths.results), self.model_ref, self.model_name,
                                chain=self.chain)
            ident = self.identity(replace={
                "task.tasks": point.task, "task.lr": point.lr, "task.weight_decay": point.weight_decay,
                "task.epochs": point.epochs, "task.seed": point.seed, "task.definitions": s.definitions[point.task],
                "task.data": data[point.task], "task.init": init.run_id or init.checkpoint,
                "task.eval_batches": s.eval_interval.get(point.task), **head, **self.chained_protocol(init),
            })
            rid = results.run_id(ident, {"lr": point.lr, "wd": point.weight_decay, "ep": point.epochs,
                                         "seed": point.seed})
            out.append(Cell(point.task, rid, ident, payload=(point, init)))
        return out

    def chained_protocol(self, init: InitSource) -> dict[str, Any]:
        """A point that starts from another run's weights computes one stage more, ``load.chain`` (what is carried),
        whose version enters its identity alone: a point from the pretrained encoder keeps the id it had."""
        if init.checkpoint is None:
            return {}
        return {"protocol": stages.versions([*self.task_spec.stages_for(self.config), CHAIN_STAGE])}

    def fitted_lengths(self) -> dict[str, int]:
        return {"task.max_length": int(self.settings.max_length)}

    def work(self, mode: str, skip: Sequence[str] = ()) -> Work:
        """Training and dev-evaluation tokens: per task, each epoch of its grid points and every seed the protocol
        runs; dev passes every ``eval_interval`` batches plus one at the end (authors), or ``evals_per_epoch`` per
        epoch plus the restored best's (best_epoch). Early stopping makes both upper bounds."""
        from harness.data.sizes import glue_task

        s, c, w = self.settings, cost_data(), Work()
        authors = s.training.scoring_protocol == "authors"
        n_seeds = len(seeds(s, int(self.cfg.seed)))
        tasks = {t.name: t for t in self.tasks}
        for name in [s.tasks] if isinstance(s.tasks, str) else s.tasks:
            local = glue_task(s.data_dir, tasks[name].local)
            train, dev, tokens = local or c["glue"][name]
            w.local, w.published = w.local + (local is not None), w.published + (local is None)
            epochs = sum(epoch_values(tasks[name], s))
            if authors:
                steps = math.ceil(train / s.training.batch_size) * epochs
                passes = steps // max(int(s.eval_interval.get(name, steps) or steps), 1) + 1
            else:
                passes = epochs * s.training.evals_per_epoch + 1
            w.train += train * tokens * epochs * n_seeds
            w.short += dev * tokens * passes * n_seeds
        return w

    def computed_by(self, cells: Sequence[Cell]) -> dict[str, Any]:
        from harness.stages import glue as compute
        from harness.stages.context import GlueStages

        return {"compute": compute.run, "finish": compute.finish, "check": check,
                "stages": GlueStages(tasks=tuple(self.tasks))}


def check(plan: RunPlan, todo: Sequence[Cell]) -> None:
    """Before any data or model is loaded: the model's checks, and a precision the Trainer really trains in. fp16 on
    a CPU is refused: transformers' Trainer leaves it to accelerate, which autocasts fp16 only on an accelerator
    (``Accelerator.__init__``: ``native_amp`` stays False for fp16 on cpu), so the run would train and evaluate in
    fp32 under an fp16 run id and record (its losses equal the fp32 run's to the last bit)."""
    check_model(plan, todo)
    if plan.precision == "fp16" and not plan.device.startswith(("cuda", "mps", "xpu")):
        raise HarnessError(f"precision=fp16 on device {plan.device}: transformers' Trainer runs fp32 there (no fp16 "
                           "autocast on a CPU), so the records would claim fp16 for fp32 numbers; use precision=fp32, "
                           "auto (bf16 where faster) or bf16, or run on a GPU")
