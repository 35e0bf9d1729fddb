"""Trainer callbacks and guards shared by every fine-tuning path."""

from __future__ import annotations

import contextlib
import math
import shutil
from collections.abc import Iterator
from pathlib import Path

from transformers import TrainerCallback

from harness.console import Progress, interactive
from harness.errors import TrainingDivergedError
from harness.training.ranks import rank


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


class ProgressLines(TrainerCallback):
    """Training progress through the console when no bar is drawn (SLURM logs, pipes): one line per evaluation
    and at most ~20 loss lines a run, each with the step count, epoch, loss or score, and an estimate of what is
    left. On a terminal the Trainer's own tqdm bar shows it instead."""

    def __init__(self, desc: str = "training") -> None:
        self.desc = desc
        self.progress: Progress | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        show = not interactive() and rank() == 0      # several processes (task.devices): rank 0 speaks for all
        self.progress = Progress(state.max_steps, self.desc, "steps", show=show, each_update_is_a_step=True)

    def _line(self, state, note: str) -> None:
        if self.progress is not None:
            self.progress.update(max(0, state.global_step - self.progress.n), f"epoch {state.epoch or 0:.2f}, {note}")

    def on_log(self, args, state, control, logs=None, **kwargs):
        every = max(1, state.max_steps // 20)       # at most ~20 loss lines a run; evaluations always get one
        if logs and "loss" in logs and self.progress is not None and state.global_step - self.progress.n >= every:
            self._line(state, f"loss {logs['loss']:.4f}")

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        shown = {k: v for k, v in (metrics or {}).items() if k in ("eval_score", "eval_loss")}
        self._line(state, ", ".join(f"{k[5:]} {v:.4f}" for k, v in shown.items()) or "evaluated")

    def on_train_end(self, args, state, control, **kwargs):
        if self.progress is not None:
            self.progress.close()
            self.progress = None


class BatchPatienceStopping(TrainerCallback):
    """Early stopping as Composer's ``EarlyStopper`` (the ModernBERT authors' GLUE runs): one monitored dev
    metric; an evaluation improves on the best only by more than ``min_delta``; training stops at the first
    evaluation more than ``patience_batches`` optimizer steps after the best one."""

    def __init__(self, metric: str, patience_batches: int, min_delta: float) -> None:
        self.metric, self.patience, self.min_delta = metric, int(patience_batches), float(min_delta)
        self.best: float | None = None
        self.best_step = 0

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        value = (metrics or {}).get(f"eval_{self.metric}")
        if value is None:
            raise KeyError(f"early stopping watches eval_{self.metric}, which the evaluation did not return")
        if self.best is None or (value > self.best and abs(value - self.best) > self.min_delta):
            self.best, self.best_step = float(value), state.global_step
        elif state.global_step - self.best_step > self.patience:
            control.should_training_stop = True
