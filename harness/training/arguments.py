"""What every trainer here shares: its training arguments' shared fields; callbacks and guards (a NaN loss stops it,
progress lines off a terminal, an unfinished run's checkpoints removed); the end of a run (checks, save, facts)."""

from __future__ import annotations

import contextlib
import math
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from transformers import TrainerCallback

from harness.core.console import Progress, interactive
from harness.core.errors import HarnessError, TrainingDivergedError
from harness.training import ranks, tracking

if TYPE_CHECKING:
    from harness.training.settings import TrainRun
    from harness.training.tracking import Tracker


class Batches(Protocol):
    """What a trainer's settings node holds for the shared arguments."""

    warmup_ratio: float
    batch_size: int
    gradient_accumulation_steps: int


def training_arguments(node: Batches, run: TrainRun, output_dir: str | Path, *, tracker: Tracker | None = None,
                       sentence_transformers: bool = True, **fields: Any) -> Any:
    """``SentenceTransformerTrainingArguments`` (or ``TrainingArguments``) with the shared fields and ``fields``."""
    n = ranks.world()
    if node.gradient_accumulation_steps % n:
        raise HarnessError(f"{n} training processes cannot share task.gradient_accumulation_steps="
                           f"{node.gradient_accumulation_steps}: set task.devices to a divisor of it")
    if sentence_transformers:
        from sentence_transformers import SentenceTransformerTrainingArguments as Arguments
    else:
        from transformers import TrainingArguments as Arguments

    shared: dict[str, Any] = {
        "output_dir": str(output_dir),
        "num_train_epochs": run.epochs,
        "per_device_train_batch_size": node.batch_size,
        "gradient_accumulation_steps": node.gradient_accumulation_steps // n,
        "learning_rate": run.lr,
        # transformers 5: a float < 1 is a ratio of the total steps
        "warmup_steps": float(node.warmup_ratio) if node.warmup_ratio > 0 else 0,
        "bf16": run.precision == "bf16",
        "fp16": run.precision == "fp16",
        "logging_nan_inf_filter": False,
        "save_strategy": "no",
        "seed": run.seed,
        "data_seed": run.seed,
        "use_cpu": run.device == "cpu",
        "disable_tqdm": not interactive(),  # a tqdm bar on a terminal; elsewhere the ProgressLines callback prints
        **(tracker or tracking.NONE).training_args(),
        **({"ddp_backend": "gloo" if run.device == "cpu" else "nccl", "ddp_find_unused_parameters": False} if n > 1 else {}),
    }
    args = Arguments(**(shared | fields))
    if n > 1:   # sentence-transformers turns drop_last on under DDP, against ranks hanging on an uneven last batch;
        # ranks.StepBatches evens the ranks out instead, so the last batch stays what one process takes
        args.dataloader_drop_last = bool(fields.get("dataloader_drop_last", False))
    return args


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
    """Remove the trainer's checkpoint ``folder`` when training does not finish (an error, ``scancel``)."""
    try:
        yield
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


class ProgressLines(TrainerCallback):
    """Training progress when no bar is drawn: a line per evaluation, at most ~20 loss lines a run."""

    def __init__(self, desc: str = "training") -> None:
        self.desc = desc
        self.progress: Progress | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        show = not interactive() and ranks.rank() == 0      # several processes (task.devices): rank 0 speaks for all
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


def check_loss(loss: float) -> None:
    """A NaN or infinite mean training loss: the run diverged."""
    if not math.isfinite(loss):
        raise TrainingDivergedError(
            f"mean training loss is {loss}: the run diverged; lower task.lr or use precision=fp32."
        )


def finish_training(model: Any, result: Any, output_dir: str | Path, *, cfg: Batches, n_rows: int,
                    rows: str, tracker: Tracker | None = None, facts: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Check the run, save ``model`` to ``output_dir/model`` (rank 0) and return the record's training facts."""
    tracker = tracker or tracking.NONE
    if result.global_step == 0:     # the data did not fill one (accumulated) batch
        raise HarnessError(
            f"training ran 0 optimisation steps on {n_rows} {rows} (batch {cfg.batch_size} x accumulation "
            f"{cfg.gradient_accumulation_steps}): lower task.batch_size or task.gradient_accumulation_steps, or "
            "provide more data."
        )
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
