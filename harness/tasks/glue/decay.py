"""What a GLUE grid point's weight decay leaves of the weights over its run, worked out before any training, and the
refusal of one that would shrink every weight to a fraction of itself: under ``weight_decay_convention=composer``
(the authors' DecoupledAdamW) AdamW's ``wd`` is ``weight_decay / lr``, so 0.01 decays 1% per step; the paper's grid
keeps at least 75%, 0.01 under composer on STS-B 1% after 10 epochs (the run that ended at Spearman -0.03)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from harness.core.errors import HarnessError


class GridPoint(Protocol):
    """What the arithmetic reads of a GLUE grid point (:class:`harness.tasks.glue.grid.GridPoint`)."""

    task: str
    lr: float
    weight_decay: float
    epochs: int


#: the least fraction of itself weight decay alone may leave of a weight over a run's planned steps
KEEP_AT_LEAST = 0.5


def adamw_weight_decay(point: GridPoint, tcfg: Any, convention: str | None = None) -> float:
    """The ``weight_decay`` torch's AdamW gets: ``composer`` (the authors' DecoupledAdamW decays by
    weight_decay x lr_t / lr, so AdamW's lr_t x wd needs wd = weight_decay / lr) | ``torch`` (as given)."""
    if (convention or tcfg.weight_decay_convention) == "composer":
        return float(point.weight_decay) / float(point.lr)
    return float(point.weight_decay)


def planned_steps(n_train: int, tcfg: Any, epochs: int) -> int:
    """Optimizer steps the Trainer plans: ceil(ceil(rows / batch) / accumulation) per epoch, at least 1."""
    t = tcfg.training
    per_epoch = max(1, math.ceil(math.ceil(n_train / int(t.batch_size)) / int(t.gradient_accumulation_steps)))
    return per_epoch * int(epochs)


def lr_multipliers(steps: int, warmup_ratio: float) -> np.ndarray:
    """lr_t / lr per optimizer step: transformers' linear schedule (warm-up over ceil(ratio x steps), decay to 0)."""
    warm = math.ceil(steps * warmup_ratio) if warmup_ratio > 0 else 0
    t = np.arange(steps, dtype=np.float64)
    return np.where(t < warm, t / max(1, warm), np.maximum(0.0, (steps - t) / max(1, steps - warm)))


def decay_factor(point: GridPoint, tcfg: Any, n_train: int, convention: str | None = None) -> tuple[float, int]:
    """(what decay alone leaves of a weight, planned steps): the product of ``1 - lr_t * adamw_weight_decay``."""
    steps = planned_steps(n_train, tcfg, point.epochs)
    warmup = lr_multipliers(steps, float(tcfg.training.warmup_ratio))
    rates = float(point.lr) * adamw_weight_decay(point, tcfg, convention) * warmup
    if (rates >= 1).any():
        return 0.0, steps
    return float(np.exp(np.log1p(-rates).sum())), steps


def check_decay(points: Sequence[GridPoint], sizes: Mapping[str, int], tcfg: Any) -> None:
    """Before any training: no grid point's weight decay leaves less than :data:`KEEP_AT_LEAST` of the weights."""
    for p in {(p.task, p.lr, p.weight_decay, p.epochs): p for p in points}.values():   # each distinct run once
        kept, steps = decay_factor(p, tcfg, sizes[p.task])
        if kept >= KEEP_AT_LEAST:
            continue
        key = "task.weight_decay" if tcfg.weight_decay is not None else "task.grid.weight_decays"
        convention = str(tcfg.weight_decay_convention)
        other = "torch" if convention == "composer" else "composer"
        kept_other, _ = decay_factor(p, tcfg, sizes[p.task], other)
        raise HarnessError(
            f"{key}: weight decay {p.weight_decay:g} under task.weight_decay_convention={convention} (AdamW decay "
            f"{adamw_weight_decay(p, tcfg):g}) would shrink every weight to {100 * kept:.2g}% of itself over the "
            f"{steps:,} steps of {p.task} at lr {p.lr:g}, {p.epochs} epoch(s), decay alone; a run must keep at "
            f"least {100 * KEEP_AT_LEAST:.0f}%. Lower it (the paper's grid under composer: 1e-6 to 1e-5), or set "
            f"task.weight_decay_convention={other} if the value was meant that way (it would keep "
            f"{100 * kept_other:.4g}%)."
        )
