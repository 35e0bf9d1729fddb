"""``task=efficiency``: inference throughput as the ModernBERT paper measured it (section 4; Tables 2, 10, 11), on four
synthetic sets: tokens per second, the largest batch, the fraction of dense matmul throughput. A record per set."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from functools import cached_property
from typing import Any

from harness.core import results
from harness.core.errors import HarnessError
from harness.core.registry import Registry
from harness.core.typed import build
from harness.core.work import Work
from harness.specs.stages import Stage
from harness.tasks.efficiency import compute
from harness.tasks.efficiency.settings import EfficiencySettings, SetSpec
from harness.tasks.runplan import Cell, RunPlan, Setup, check_model, excluded_keys

#: the efficiency task's one stage, with its protocol version (its code: :mod:`harness.tasks.efficiency.compute`)
STAGES: Registry[Stage] = Registry("stage", {
    "measure.throughput": Stage(1, what="timed passes, max-batch probes (Table 2): harness.tasks.efficiency.throughput"),
}, hint="Declare it in STAGES of harness/tasks/efficiency/planner.py.")


class EfficiencyPlanner:
    """``task=efficiency``: one cell per synthetic set, under one run id that holds the hardware it runs on."""

    settings_class = EfficiencySettings

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.settings = build(EfficiencySettings, setup.task, f"task {setup.name!r}", key="task")
        self.identity_exclude = excluded_keys(EfficiencySettings)

    @cached_property
    def precision(self) -> str:
        """``task.precision`` (the paper's fp32 by default) where set, else the top-level ``precision``."""
        from harness.models import resolve_precision
        chosen = self.settings.precision
        return resolve_precision(str(self.setup.cfg.precision if chosen is None else chosen), self.setup.device)

    def identity(self, replace: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.setup.identity(STAGES, self.identity_exclude, precision=self.precision, replace=replace)

    # ---------------------------------------------------------------------------------------- planning
    def set_spec(self, name: str) -> SetSpec:
        if name not in self.settings.sets:
            from harness.core.errors import unknown_name
            raise unknown_name("synthetic set", name, self.settings.sets,
                               "Define it under task.sets (length, or mean/std/min/max, and batch_size).")
        return build(SetSpec, self.settings.sets[name], f"task.sets.{name}")

    def work(self, mode: str, skip: Sequence[str] = ()) -> Work:
        """The tokens of every set's timed and warm-up passes."""
        s, w = self.settings, Work()
        for name in s.datasets:
            spec = self.set_spec(name)
            length = float(spec.length if spec.length is not None else spec.mean)   # type: ignore[arg-type]
            w.add_tokens(float(s.n_docs) * length * (s.repeats + s.warmup), length)
        return w

    @property
    def compiled(self) -> bool:
        """``compile=true`` on a CUDA device: the encoder's forward through torch.compile (CPU: ignored)."""
        from harness.models.compiled import wanted
        return wanted(self.setup.cfg, self.setup.device)

    def cells(self) -> list[Cell]:
        from harness.tasks.efficiency import throughput as tp
        s = self.settings
        if s.token_low >= s.token_high:   # each bound alone is typed (harness.core.typed.count, at_least)
            raise HarnessError(f"task.token_low={s.token_low} must be below task.token_high={s.token_high}: token "
                               "ids are drawn from [token_low, token_high)")
        # throughput depends on the device: in the identity (excluded from other families' ids); compile changes the
        # speed, this task's number: in the identity where it is on (off keeps the ids as before)
        hardware = {"device": self.setup.device, "name": tp.device_name(self.setup.device)}
        ident = self.identity(replace={"hardware": hardware, **({"compile": True} if self.compiled else {})})
        rid = results.run_id(ident, {"prec": self.precision, "n": s.n_docs})
        plan_key = results.stable_hash(self.identity())   # what a planner on another machine computes too
        cells = []
        for name in s.datasets:
            spec = self.set_spec(name)
            data = {"set": asdict(spec), "n_docs": s.n_docs, "seed": s.seed, "ids": [s.token_low, s.token_high]}
            cells.append(Cell(name, rid, ident, results.stable_hash(data), spec, plan_key=plan_key))
        return cells

    @classmethod
    def plan(cls, setup: Setup, *, mode: str = "run", skip: Sequence[str] = (), round: int = 0) -> RunPlan[Any, Any]:
        """The plan of the run ``setup`` holds (the planner made and asked for it: :meth:`runplan`)."""
        return cls(setup).runplan(mode=mode, skip=skip, round=round)

    def runplan(self, *, mode: str = "run", skip: Sequence[str] = (), round: int = 0) -> RunPlan[EfficiencySettings, None]:
        """The run's :class:`~harness.tasks.runplan.RunPlan`: its sets' cells, the passes' work."""
        su, s = self.setup, self.settings
        hyperparameters = {"precision": self.precision, "n_docs": s.n_docs, "repeats": s.repeats, "warmup": s.warmup,
                           "unpad": s.unpad, "pad_to": s.pad_to, "seed": s.seed}
        return RunPlan(
            task=su.name, model_name=su.model.name, model=su.model, device=su.device, layout=su.layout,
            config=su.config, overwrite=bool(su.cfg.overwrite), save_run=bool(su.cfg.get("save_run")), lineage=None, settings=s,
            precision=self.precision, lr=None, trains=False, seed=int(su.cfg.seed),
            cells=self.cells() if round == 0 else [], later=False,
            header=su.header(self.precision, hyperparameters=hyperparameters),
            work=self.work(mode, skip), compute=compute.run, check=check_model, fitted={}, weights=su.weights_dir(),
            stages=None)
