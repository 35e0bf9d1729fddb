"""Trainer callbacks shared by every fine-tuning path."""

from __future__ import annotations

import math

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
