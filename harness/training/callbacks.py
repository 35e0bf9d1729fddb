"""Trainer callbacks and guards shared by every fine-tuning path."""

from __future__ import annotations

import contextlib
import math
import shutil
from collections.abc import Iterator
from pathlib import Path

from transformers import TrainerCallback

from harness.errors import TrainingDivergedError


class NaNLossGuard(TrainerCallback):
    """Stop a run as soon as a logged training loss is NaN or infinite (needs ``logging_nan_inf_filter=False``)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(loss):
            raise TrainingDivergedError(
                f"training loss became {loss} at step {state.global_step} (epoch {state.epoch or 0:.2f}): the run "
                "diverged; lower task.lr, use precision=fp32, or check the training data for empty texts"
            )


@contextlib.contextmanager
def discard_unfinished(folder: Path) -> Iterator[None]:
    """Remove the trainer's checkpoint ``folder`` when training does not finish (an error, or ``scancel`` / a
    requeue, which :mod:`harness.scheduler` turns into ``SystemExit``); a finished training's folder stays."""
    try:
        yield
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
