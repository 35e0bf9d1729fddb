"""The end of a training run, once for every trainer: it took optimisation steps, its loss is finite, the model is
saved, and the facts a record keeps about it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError, TrainingDivergedError
from harness.training import tracking

if TYPE_CHECKING:
    from harness.training.arguments import Batches
    from harness.training.tracking import Tracker


def check_steps(steps: int, n_rows: int, rows: str, cfg: Batches) -> None:
    """Zero optimisation steps means the data did not fill one (accumulated) batch: fail, naming the fix."""
    if steps == 0:
        raise HarnessError(
            f"training ran 0 optimisation steps on {n_rows} {rows} (batch {cfg.batch_size} x accumulation "
            f"{cfg.gradient_accumulation_steps}): lower task.batch_size or task.gradient_accumulation_steps, or "
            "provide more data."
        )


def check_loss(loss: float) -> None:
    """A NaN or infinite mean training loss: the run diverged."""
    if not math.isfinite(loss):
        raise TrainingDivergedError(
            f"mean training loss is {loss}: the run diverged; lower task.lr or use precision=fp32."
        )


def finish_training(model: Any, result: Any, output_dir: str | Path, *, cfg: Batches, n_rows: int,
                    rows: str, tracker: Tracker | None = None, facts: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Check the run (:func:`check_steps`, :func:`check_loss`), save ``model`` to ``output_dir/model`` and return
    the record's training facts: steps, mean loss, ``n_<rows>``, effective batch size, ``facts``, where the model
    is, and the tracker's description when one is on. ``result``: what ``Trainer.train()`` returned. On several
    processes only rank 0 saves; the others wait for it."""
    from harness.training import ranks

    tracker = tracker or tracking.NONE
    check_steps(result.global_step, n_rows, rows, cfg)
    check_loss(result.training_loss)
    final = Path(output_dir) / "model"
    if ranks.rank() == 0:
        model.save(str(final))
    ranks.barrier()
    return {
        "steps": result.global_step,
        "train_loss": float(result.training_loss),
        f"n_{rows}": n_rows,
        "effective_batch_size": cfg.batch_size * cfg.gradient_accumulation_steps,
        **({"devices": ranks.world(), "accumulation_per_device": cfg.gradient_accumulation_steps // ranks.world()}
           if ranks.world() > 1 else {}),
        **(facts or {}),
        "model_dir": str(final),
        **({"tracking": tracker.describe()} if tracker.enabled else {}),
    }
