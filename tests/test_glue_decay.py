"""GLUE's weight decay worked out before training (harness/tasks/glue/decay.py): the factor it leaves of the
weights equals what torch's AdamW does under the trainer's schedule; the paper's grid keeps at least 75%; a decay
meant for torch's convention given under composer's is refused, naming the convention."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness.core.errors import HarnessError
from harness.tasks.glue.decay import KEEP_AT_LEAST, check_decay, decay_factor, planned_steps
from harness.tasks.glue.grid import GridPoint

#: GLUE's training rows (the official train sets) and each task's epoch set (conf/task/glue.yaml)
SIZES = {"mnli": 392_702, "qqp": 363_846, "qnli": 104_743, "sst2": 67_349, "cola": 8_551, "stsb": 5_749,
         "mrpc": 3_668, "rte": 2_490}
EPOCHS = {"mnli": [1, 2, 3], "sst2": [1, 2, 3], "rte": [1, 2, 3], "qqp": [2, 5, 10], "qnli": [2, 5, 10],
          "cola": [2, 5, 10], "stsb": [2, 5, 10], "mrpc": [2, 5, 10]}


def settings(convention: str = "composer", weight_decay: float | None = None, **kw: object) -> SimpleNamespace:
    """The keys the check reads, at the paper's values (conf/task/glue.yaml)."""
    base = {"batch_size": 64, "gradient_accumulation_steps": 1, "warmup_ratio": 0.1}
    return SimpleNamespace(training=SimpleNamespace(**(base | kw)), weight_decay_convention=convention,
                           weight_decay=weight_decay)


def test_the_factor_is_what_torch_adamw_does_under_the_trainers_schedule() -> None:
    """With no gradient, AdamW only decays: the weight after the run is the computed factor of itself."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    point, tcfg = GridPoint("rte", 5e-5, 0.003, 3, 1), settings(batch_size=8)
    kept, steps = decay_factor(point, tcfg, 100)
    assert steps == planned_steps(100, tcfg, 3) == 39
    weight = torch.nn.Parameter(torch.ones(4, dtype=torch.float64))
    opt = torch.optim.AdamW([weight], lr=point.lr, weight_decay=point.weight_decay / point.lr)
    sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=4, num_training_steps=steps)  # ceil(0.1 x 39)
    for _ in range(steps):
        weight.grad = torch.zeros_like(weight)
        opt.step()
        sched.step()
    assert weight.detach()[0].item() == pytest.approx(kept, rel=1e-12)


def test_the_papers_grid_keeps_at_least_three_quarters_of_every_weight() -> None:
    points = [GridPoint(t, lr, wd, ep, 42) for t in SIZES for lr in (1e-5, 3e-5, 5e-5, 8e-5)
              for wd in (1e-6, 5e-6, 8e-6, 1e-5) for ep in EPOCHS[t]]
    check_decay(points, SIZES, settings())
    worst = min(decay_factor(p, settings(), SIZES[p.task])[0] for p in points)
    assert 0.75 < worst < 0.76 and worst > KEEP_AT_LEAST   # QQP, 10 epochs, 1e-5: 56,860 steps


@pytest.mark.parametrize(("epochs", "kept", "shown"), [(2, 0.405, "41"), (5, 0.105, "10"), (10, 0.011, "1.1")])
def test_a_torch_sized_decay_under_composer_is_refused(epochs: int, kept: float, shown: str) -> None:
    """STS-B with weight_decay 0.01 (a torch-sized value) under composer: 1% of every weight per step at the peak."""
    point = GridPoint("stsb", 5e-5, 0.01, epochs, 42)
    assert decay_factor(point, settings(), SIZES["stsb"])[0] == pytest.approx(kept, abs=0.001)
    with pytest.raises(HarnessError, match=rf"task\.weight_decay: weight decay 0\.01 under "
                                           rf"task\.weight_decay_convention=composer \(AdamW decay 200\) would shrink "
                                           rf"every weight to {shown}% of itself over the {90 * epochs:,} "
                                           r"steps of stsb .* task\.weight_decay_convention=torch"):
        check_decay([point], SIZES, settings(weight_decay=0.01))
    check_decay([point], SIZES, settings("torch", weight_decay=0.01))   # as torch means it: 99.98% kept
