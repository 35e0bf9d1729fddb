"""``task=glue``'s planner: every grid point of every task a cell, from the encoder :mod:`.chain` resolves; chained
tasks once MNLI's records exist."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from functools import cached_property
from typing import Any, ClassVar

from harness.core import file_hash, results
from harness.core.errors import HarnessError
from harness.core.registry import Registry
from harness.core.typed import build
from harness.core.work import Work, cost_data
from harness.specs import dependencies
from harness.specs.stages import Stage, versions
from harness.tasks.glue import compute
from harness.tasks.glue import data as glue_data
from harness.tasks.glue.chain import resolve_init
from harness.tasks.glue.grid import (
    GlueSettings,
    GlueStages,
    InitSource,
    epoch_values,
    grid_points,
    order_tasks,
    seeds,
)
from harness.tasks.runplan import Cell, RunPlan, Setup, check_model, data_free_key, excluded_keys

#: GLUE's stages, each with its protocol version (their code is :mod:`harness.tasks.glue.compute`'s)
STAGES: Registry[Stage] = Registry("stage", {
    "load.classifier": Stage(1, what="a sequence classifier (fresh head): harness.tasks.glue.classification"),
    # computed (and versioned) only by points starting from another run's weights (MNLI's, task.init_from); 1: the
    # encoder alone carried (never hashed), 2: every weight but the final classifier, as the authors carried it
    "load.chain": Stage(2, what="the weights a chained GLUE point starts from: all but classifier.*, "
                              "harness.tasks.glue.classification.carry_weights"),
    "train.glue": Stage(2, what="Trainer; authors (last eval, seeds) or best_epoch: harness.tasks.glue.classification"),
    "score.glue": Stage(1, what="GLUE dev metrics (sklearn/scipy): harness.tasks.glue.metrics"),
}, hint="Declare it in STAGES of harness/tasks/glue/planner.py.")
#: the stage a point that starts from another run's weights computes beyond the spec's
CHAIN_STAGE = "load.chain"


class GluePlanner:
    """``task=glue``: one cell per (grid point, GLUE task); RTE/MRPC/STS-B planned after MNLI has run."""

    settings_class = GlueSettings
    root_exclude: ClassVar[Mapping[str, str]] = {
        "seed": "GLUE's seed is task.seed (which defaults to it), replaced by each grid point's seed",
    }

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.settings = build(GlueSettings, setup.task, f"task {setup.name!r}", key="task")
        self.identity_exclude = excluded_keys(GlueSettings, self.root_exclude)

    @cached_property
    def tasks(self) -> list[glue_data.GlueTask]:
        s = self.settings
        from harness.tasks.glue.scores import SCORE_KEYS
        defs = glue_data.task_definitions(s.definitions, SCORE_KEYS)
        return order_tasks(glue_data.select_tasks(s.tasks, defs), self.chain)

    @cached_property
    def chain(self) -> dict[str, tuple[str, ...]]:
        """Which tasks start from which run (the spec's ``depends_on``, unless ``task.mnli_init=off``)."""
        return dependencies.chained(self.setup.spec, self.settings)

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
        files = {t.name: glue_data.local_files(t, s.data_dir) for t in tasks} if s.data_dir else {}
        # the head this model fine-tunes with (model.glue), where set: runs of a model without one keep their ids
        model = self.setup.model
        head = {} if model.glue is None else {"task.head": asdict(model.glue)}
        out = []
        for point in grid_points(tasks, s, int(self.setup.cfg.seed)):
            init = resolve_init(point.task, s, self.setup.layout.results, self.setup.model_ref, model.name,
                                chain=self.chain)
            ident = self.setup.identity(STAGES, self.identity_exclude, replace={
                "task.tasks": point.task, "task.lr": point.lr, "task.weight_decay": point.weight_decay,
                "task.epochs": point.epochs, "task.seed": point.seed, "task.definitions": s.definitions[point.task],
                "task.data": data[point.task], "task.init": init.run_id or init.checkpoint,
                "task.eval_batches": s.eval_interval.get(point.task), **head, **self.chained_protocol(init),
            })
            rid = results.run_id(ident, {"lr": point.lr, "wd": point.weight_decay, "ep": point.epochs,
                                         "seed": point.seed})
            local = files.get(point.task)   # its content is in the run id: a new version of a file is a new run
            out.append(Cell(point.task, rid, ident, payload=(point, init),
                            files=file_hash.describe(local, s.data_dir) if local else None,
                            data_free_key=data_free_key(ident, ["task.data"], local) if local else None))
        return out

    def chained_protocol(self, init: InitSource) -> dict[str, Any]:
        """A point that starts from another run's weights computes one stage more, ``load.chain`` (what is carried),
        whose version enters its identity alone: a point from the pretrained encoder keeps the id it had."""
        if init.checkpoint is None:
            return {}
        return {"protocol": versions(STAGES, [*self.setup.spec.stages_for(self.setup.config), CHAIN_STAGE])}

    def fitted_lengths(self) -> dict[str, int]:
        return {"task.max_length": int(self.settings.max_length)}

    def work(self, mode: str, skip: Sequence[str] = ()) -> Work:
        """Training and dev-evaluation tokens of every grid point and seed (upper bounds: early stopping)."""
        from harness.data.sizes import glue_task
        s, c, w = self.settings, cost_data(), Work()
        authors = s.training.scoring_protocol == "authors"
        n_seeds = len(seeds(s, int(self.setup.cfg.seed)))
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

    @classmethod
    def plan(cls, setup: Setup, *, mode: str = "run", skip: Sequence[str] = (), round: int = 0) -> RunPlan[Any, Any]:
        """The plan of the run ``setup`` holds (the planner made and asked for it: :meth:`runplan`)."""
        return cls(setup).runplan(mode=mode, skip=skip, round=round)

    def runplan(self, *, mode: str = "run", skip: Sequence[str] = (), round: int = 0) -> RunPlan[GlueSettings, GlueStages]:
        """Round ``round``'s :class:`~harness.tasks.runplan.RunPlan` (planned from earlier rounds' records) and work."""
        su, rounds = self.setup, self.rounds()
        cells = rounds[round]() if round < len(rounds) else []
        return RunPlan(
            task=su.name, model_name=su.model.name, model=su.model, device=su.device, layout=su.layout,
            config=su.config, overwrite=bool(su.cfg.overwrite), save_run=bool(su.cfg.get("save_run")), lineage=None, settings=self.settings,
            precision=su.precision, lr=None, trains=False, seed=int(su.cfg.seed), cells=cells,
            later=round + 1 < len(rounds), header=su.header(),
            work=self.work(mode, skip), compute=compute.run, check=check, fitted=self.fitted_lengths(),
            weights=su.weights_dir(), select_after=True, stages=GlueStages(tasks=tuple(self.tasks)))


def check(plan: RunPlan[GlueSettings, GlueStages], todo: Sequence[Cell]) -> None:
    """Before any data or model: the model's checks; fp16 on a CPU refused (accelerate would train fp32)."""
    check_model(plan, todo)
    if plan.precision == "fp16" and not plan.device.startswith(("cuda", "mps", "xpu")):
        raise HarnessError(f"precision=fp16 on device {plan.device}: transformers' Trainer runs fp32 there (no fp16 "
                           "autocast on a CPU), so the records would claim fp16 for fp32 numbers; use precision=fp32, "
                           "auto (bf16 where faster) or bf16, or run on a GPU")
