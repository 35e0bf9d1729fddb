"""``task=efficiency``: inference throughput as the ModernBERT paper measured it (section 4; Tables 2, 10, 11).

Four synthetic sets of random ordinary token ids (8,192 documents each: fixed 512, normal(256, 64) in [32, 512],
fixed 8,192, normal(4,096, 1,024) in [32, 8,192]); tokens per second over real tokens, mean and std over 10
timed passes after a warm-up; the largest batch that fits (each probe in its own process); the device's dense
matmul throughput as the roofline and the model's achieved fraction of it. One record per (model, set).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any

from harness.core import results
from harness.core.errors import HarnessError
from harness.core.typed import at_least, build, choices, count, excluded, nonempty, positive
from harness.core.work import Work
from harness.tasks.base import Cell, Family
from harness.tasks.retrieval.settings import SetSpec


@dataclass(kw_only=True)
class MaxBatchSettings:
    search: bool                      # find the largest batch that fits (one process per probe)
    limit: int = count()              # never probe above this (ModernBERT's script stopped at 4,096)
    resolution: int = count()         # stop bisecting when the bracket is this narrow
    #: budget per probe; null: the device's memory (CPU: 80% of MemAvailable)
    memory_gb: float | None = positive(null="the device's memory")
    #: CPU: time budget of a probe's forward (default in conf/task/efficiency.yaml)
    probe_seconds: float | None = positive(null="no time budget")


@dataclass(kw_only=True)
class EfficiencySettings:
    name: str
    datasets: list[str] = nonempty("sets", excluded="which sets to measure: each one is its own cell of the same run")
    sets: dict[str, Any] = excluded("each cell's own set definition is part of its data spec")
    n_docs: int = count()
    repeats: int = count()
    warmup: int = at_least(0)
    seed: int
    token_low: int = at_least(0)
    token_high: int = count()
    unpad: str = choices("auto", "on", "off")
    pad_to: str = choices("set_max", "longest")
    max_batch: MaxBatchSettings
    #: CPU: time budget of a set's passes (default in conf/task/efficiency.yaml)
    set_seconds: float | None = positive(null="no time budget")
    roofline: bool
    roofline_size: int = count()
    precision: str | None = choices(None, "auto", "fp32", "bf16", "fp16")


class EfficiencyFamily(Family):
    settings_class = EfficiencySettings

    @cached_property
    def precision(self) -> str:
        """``task.precision`` (the paper's fp32 by default) where set, else the top-level ``precision``."""
        from harness.models import resolve_precision

        chosen = self.settings.precision
        return resolve_precision(str(self.cfg.precision if chosen is None else chosen), self.device)

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

        return wanted(self.cfg, self.device)

    def cells(self) -> list[Cell]:
        from harness.tasks.efficiency import throughput as tp

        s = self.settings
        if s.token_low >= s.token_high:   # each bound alone is typed (harness.core.typed.count, at_least)
            raise HarnessError(f"task.token_low={s.token_low} must be below task.token_high={s.token_high}: token "
                               "ids are drawn from [token_low, token_high)")
        # throughput depends on the device: in the identity (excluded from other families' ids); compile changes the
        # speed, this task's number: in the identity where it is on (off keeps the ids as before)
        hardware = {"device": self.device, "name": tp.device_name(self.device)}
        ident = self.identity(replace={"hardware": hardware, **({"compile": True} if self.compiled else {})})
        rid = results.run_id(ident, {"prec": self.precision, "n": s.n_docs})
        plan_key = results.stable_hash(self.identity())   # what a planner on another machine computes too
        cells = []
        for name in s.datasets:
            spec = self.set_spec(name)
            data = {"set": asdict(spec), "n_docs": s.n_docs, "seed": s.seed, "ids": [s.token_low, s.token_high]}
            cells.append(Cell(name, rid, ident, results.stable_hash(data), spec, plan_key=plan_key))
        return cells

    def computed_by(self, cells: Sequence[Cell]) -> dict[str, Any]:
        from harness.tasks.efficiency import compute

        s = self.settings
        return {"compute": compute.run, "header": self.header(hyperparameters={
            "precision": self.precision, "n_docs": s.n_docs, "repeats": s.repeats, "warmup": s.warmup,
            "unpad": s.unpad, "pad_to": s.pad_to, "seed": s.seed})}
