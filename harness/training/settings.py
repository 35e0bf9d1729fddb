"""The typed settings nodes of the training stages, importable without torch: each is both the schema of its (flat)
YAML keys (``task.lr``) and what the trainer receives; role ``train``: they count only when the run trains."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from harness.core.errors import HarnessError
from harness.core.typed import at_least, choices, count, excluded, positive


@dataclass(kw_only=True)
class Training:
    """What every trainer reads: the optimisation schedule and the seed of the training run."""

    role: ClassVar[str] = "train"
    lr: float | None = positive(null="the source run's LR (a task with task.source), else the model's DPR LR")
    epochs: float = positive()
    warmup_ratio: float = at_least(0, below=1)
    batch_size: int = count()
    gradient_accumulation_steps: int = count()
    train_seed: int
    devices: int = count(excluded="how many processes train: N processes take the micro-batches one process would, "
                                  "grouped into the same optimizer steps (docs/fidelity.md); recorded")

    def __post_init__(self) -> None:
        if self.gradient_accumulation_steps % self.devices:
            valid = [n for n in range(1, self.gradient_accumulation_steps + 1)
                     if self.gradient_accumulation_steps % n == 0]
            raise HarnessError(
                f"task.devices={self.devices} does not divide task.gradient_accumulation_steps="
                f"{self.gradient_accumulation_steps}: each of the N processes accumulates "
                f"{self.gradient_accumulation_steps}/N micro-batches of task.batch_size={self.batch_size} so that N "
                f"processes take the steps one process would; valid task.devices: {', '.join(map(str, valid))} "
                "(or raise task.gradient_accumulation_steps, which changes the effective batch)")

    @property
    def accumulation_per_device(self) -> int:
        """The micro-batches each of the ``devices`` processes accumulates per optimizer step."""
        return self.gradient_accumulation_steps // self.devices

    def identity(self) -> dict[str, Any]:
        """Gathered negatives change the objective: the flag and device count enter the run id (only then)."""
        return {}


@dataclass(kw_only=True)
class DenseTraining(Training):
    """``train.dense``: sentence-transformers' (Cached)MNRL on (query, positive, negative) triplets."""

    loss: str = choices("cached_mnrl", "mnrl")
    mini_batch_size: int = count()
    max_seq_length: int = count()
    gather_across_devices: bool = excluded(
        "in the identity only when on (identity(): with task.devices, which then changes the objective), so the "
        "runs that leave it off keep their ids")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.gather_across_devices and self.devices == 1:
            raise HarnessError("task.gather_across_devices=true gathers in-batch negatives across the processes of "
                               "task.devices, which is 1: set task.devices=<N> (N > 1), or leave it false")

    def identity(self) -> dict[str, Any]:
        """Gathered negatives make the in-batch pool N times larger, a different objective: the flag and the
        device count enter the run id (only then, so every other run keeps its id)."""
        if not self.gather_across_devices:
            return {}
        return {"task.gather_across_devices": True, "task.devices": self.devices}


@dataclass(kw_only=True)
class KdTraining(Training):
    """``train.kd``: PyLate's KL distillation of teacher scores."""

    train_query_length: int = count()
    train_document_length: int = count()
    normalize_scores: bool


@dataclass(kw_only=True)
class TrainRows:
    """A trainer's rows (``task.train_data``): the ``sources`` registry and the chosen ``source``; training keys."""

    role: ClassVar[str] = "train"
    sources: ClassVar[Any]


@dataclass(kw_only=True)
class HubRows:
    """Training rows from a hub dataset at a revision (recorded: ``describe`` shows these keys as they are)."""

    hub_path: str
    hub_revision: str | None


@dataclass(kw_only=True)
class EarlyStopping:
    patience: int = count()
    min_delta: float = at_least(0)
    patience_batches: int = at_least(0)


@dataclass(kw_only=True)
class GlueTraining:
    """``train.glue``: what task=glue's trainer reads besides a grid point's values."""

    batch_size: int = count()
    eval_batch_size: int = count(excluded="how the dev set is batched")
    gradient_accumulation_steps: int = count()
    warmup_ratio: float = at_least(0, below=1)
    adam_beta1: float
    adam_beta2: float
    adam_epsilon: float
    max_grad_norm: float = at_least(0)           # 0: no clipping
    evals_per_epoch: int = count()
    early_stopping: EarlyStopping
    logging_steps: int = count(excluded="how often the loss is logged")
    dataloader_num_workers: int = at_least(0, excluded="data loading processes")   # 0: the main process
    scoring_protocol: str = choices("authors", "best_epoch")


@dataclass(frozen=True, kw_only=True)
class TrainRun:
    """What a training run gets beside its node: its resolved values, the precision and the device."""

    lr: float
    epochs: float
    seed: int
    precision: str      # fp32 | bf16 | fp16 (mixed-precision training)
    device: str
