"""Sequence-classification fine-tuning for GLUE with transformers' Trainer and early stopping, under one of two
scoring protocols: ``authors`` (the authors' Composer runs: evaluation every N batches, patience in batches, every
parameter decayed, the last evaluation scored) or ``best_epoch`` (per-epoch evaluations, the best restored); MNLI
chaining, and the ModernBERT head as the authors' FlexBERT built it (no head LayerNorm, its own attention dropout)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from transformers import DataCollatorWithPadding, EarlyStoppingCallback, TrainerCallback

from harness.core.errors import HarnessError, TrainingDivergedError
from harness.models.attention import model_type_of
from harness.models.load import attention_for, unpad_if_varlen
from harness.tasks.glue.metrics import compute
from harness.training import tracking
from harness.training.arguments import NaNLossGuard, ProgressLines, check_loss
from harness.training.arguments import training_arguments as shared_training_arguments

if TYPE_CHECKING:
    import datasets
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from harness.models.spec import GlueHead
    from harness.training.settings import GlueTraining, TrainRun
    from harness.training.tracking import Tracker

#: scoring protocols: what is evaluated when, when training stops, which weights decay, which evaluation is scored


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Everything that shapes one fine-tuning run (one GLUE grid point), checked where it was typed."""

    node: GlueTraining
    run: TrainRun
    weight_decay: float              # AdamW's, as task.weight_decay_convention makes it
    eval_steps: int | None           # authors: optimizer steps between evaluations (best_epoch: None, unused)
    monitor: str                     # authors: the one dev metric early stopping watches

    @property
    def protocol(self) -> str:
        return self.node.scoring_protocol

    def steps_per_epoch(self, n_train: int) -> int:
        return max(1, math.ceil(math.ceil(n_train / self.node.batch_size) / self.node.gradient_accumulation_steps))


@dataclass
class TrainOutcome:
    """Dev metrics of the scored weights (best restored, or the last) and how early stopping got there."""

    metrics: dict[str, float]
    best_step: int | None
    best_epoch: float | None
    epochs_run: float
    stopped_early: bool
    eval_history: list[dict[str, float]] = field(default_factory=list)
    train_loss: float | None = None
    train_seconds: float = 0.0
    eval_seconds: float = 0.0
    scored: str = "best"             # best (restored) | last (the final weights)
    predictions: np.ndarray | None = None   # per dev example, in eval order: class id, or value (regression)
    labels: np.ndarray | None = None


class BatchPatienceStopping(TrainerCallback):
    """Early stopping as Composer's ``EarlyStopper`` (the authors' GLUE runs): patience in optimizer steps."""

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


# ---------------------------------------------------------------------------------------------- model
def load_classifier(
    model_dir: str, num_labels: int, *, attn_implementation: str = "sdpa", init_from: str | None = None,
    trust_remote_code: bool = False, head: GlueHead | None = None, device: str | None = None,
) -> PreTrainedModel:
    """A classifier on ``model_dir``'s encoder with a fresh head; ``init_from`` gives every other weight."""
    from transformers import AutoModelForSequenceClassification
    kwargs: dict[str, Any] = {"attn_implementation": attention_for(attn_implementation, model_dir, device),
                              "trust_remote_code": trust_remote_code}
    problem_type = "regression" if num_labels == 1 else "single_label_classification"
    try:
        model = AutoModelForSequenceClassification.from_pretrained(
            model_dir, num_labels=num_labels, problem_type=problem_type, **kwargs, **head_config(head, model_dir)
        )
    except (OSError, ValueError) as exc:
        raise HarnessError(f"could not load a sequence classifier from {model_dir}: {exc}") from exc
    apply_head(model, head)
    if init_from is not None:
        if not Path(init_from, "config.json").exists():
            raise HarnessError(
                f"init_from checkpoint {init_from} does not exist or is not a saved model (no config.json). "
                "Re-run the MNLI grid (its best checkpoint is kept under paths.outputs) or set task.init_from."
            )
        source = AutoModelForSequenceClassification.from_pretrained(init_from, **kwargs)
        apply_head(source, head)     # its head as the run's (no norm): what was saved is what is carried
        carry_weights(model, source, init_from, model_dir)
        del source
    unpad_if_varlen(model.base_model)     # harness_varlen (CUDA): padded batches run as one packed row
    return model


#: the final classification layer's prefix in each ``*ForSequenceClassification`` the harness chains: what MNLI chaining
#: leaves fresh, as the authors' ``load_ignore_keys`` (MB@2fed0f2:src/evals/finetuning_jobs.py:288-299) left FlexBERT's
CLASSIFIER = "classifier."


def carry_weights(model: PreTrainedModel, source: PreTrainedModel, init_from: str, model_dir: str) -> list[str]:
    """Every weight of ``source`` (MNLI's) into ``model`` but the final classifier's; the names left fresh."""
    fresh = fresh_parameters(model)
    if not fresh:
        raise HarnessError(f"{type(model).__name__} has no weight named {CLASSIFIER}*: MNLI chaining carries every "
                           "weight but the final classifier, which this head does not name; set task.mnli_init=off")
    carried = {k: v for k, v in source.state_dict().items() if not k.startswith(CLASSIFIER)}
    try:
        missing, unexpected = model.load_state_dict(carried, strict=False)
    except RuntimeError as exc:   # a weight of another shape
        why = " ".join(str(exc).split())[:300]
    else:
        missing = [k for k in missing if not k.startswith(CLASSIFIER)]
        why = f"missing {', '.join(missing[:3])}" if missing else \
            f"unexpected {', '.join(unexpected[:3])}" if unexpected else ""
    if why:
        raise HarnessError(f"the classifier in {init_from} does not match model {model_dir} ({why}); chain only "
                           "checkpoints fine-tuned from the same model")
    return fresh


def fresh_parameters(model: PreTrainedModel) -> list[str]:
    """The weights MNLI chaining leaves fresh: the final classifier's (:data:`CLASSIFIER`)."""
    return [k for k in model.state_dict() if k.startswith(CLASSIFIER)]


def head_config(head: GlueHead | None, model_dir: str) -> dict[str, Any]:
    """The ``ModernBertConfig`` keys ``head`` sets before the model is built (another encoder: refused)."""
    if head is None:
        return {}
    kind = model_type_of(model_dir)
    if kind != "modernbert":
        raise HarnessError(f"model.glue sets a ModernBERT classification head, but {model_dir} is a "
                           f"{kind or 'non-transformers'} model: set model.glue=null to keep its own head")
    return {"classifier_pooling": head.classifier_pooling, "classifier_activation": head.classifier_activation,
            "classifier_dropout": float(head.classifier_dropout), "attention_dropout": float(head.attention_dropout)}


def apply_head(model: PreTrainedModel, head: GlueHead | None) -> None:
    """FlexBERT's head settings transformers has no key for: no head LayerNorm, attention output dropout."""
    if head is None:
        return
    if not head.classifier_norm:
        model.head.norm = torch.nn.Identity()
    if head.attention_output_dropout is not None:
        p = float(head.attention_output_dropout)
        for layer in model.base_model.layers:
            layer.attn.out_drop = torch.nn.Dropout(p) if p > 0 else torch.nn.Identity()


def describe_head(model: PreTrainedModel) -> dict[str, Any]:
    """What the record says of the head that was built and trained (read from the model, not from the settings)."""
    cfg = model.config
    out: dict[str, Any] = {"class": type(model).__name__}
    for key in ("classifier_pooling", "classifier_activation", "classifier_dropout", "attention_dropout"):
        if hasattr(cfg, key):
            out[key] = getattr(cfg, key)
    head = getattr(model, "head", None)
    if head is not None and hasattr(head, "norm"):
        out["classifier_norm"] = not isinstance(head.norm, torch.nn.Identity)
    layers = getattr(model.base_model, "layers", None)
    if layers is not None and hasattr(layers[0], "attn") and hasattr(layers[0].attn, "out_drop"):
        drop = layers[0].attn.out_drop
        out["attention_output_dropout"] = float(drop.p) if isinstance(drop, torch.nn.Dropout) else 0.0
    return out


# ---------------------------------------------------------------------------------------------- training
def training_arguments(cfg: TrainConfig, output_dir: Path, n_train: int, tracker: Tracker | None = None):
    """TrainingArguments: AdamW, linear warmup then decay, evaluations as ``cfg.protocol`` schedules them."""
    n = cfg.node
    per_epoch = cfg.steps_per_epoch(n_train)
    by_epoch = n.evals_per_epoch == 1
    every = max(1, math.ceil(per_epoch / n.evals_per_epoch))
    if cfg.protocol == "authors":
        schedule: dict[str, Any] = {"eval_strategy": "steps", "eval_steps": cfg.eval_steps, "save_strategy": "no",
                                    "load_best_model_at_end": False}
    else:
        schedule = {
            "eval_strategy": "epoch" if by_epoch else "steps", "save_strategy": "epoch" if by_epoch else "steps",
            "eval_steps": None if by_epoch else every, "save_steps": None if by_epoch else every,
            "save_total_limit": 1,           # with load_best_model_at_end: the best and the latest are kept
            "save_only_model": True, "load_best_model_at_end": True, "metric_for_best_model": "score",
            "greater_is_better": True,
        }
    return shared_training_arguments(n, cfg.run, output_dir, tracker=tracker, sentence_transformers=False,
                                     weight_decay=cfg.weight_decay, per_device_eval_batch_size=n.eval_batch_size,
                                     lr_scheduler_type="linear", adam_beta1=n.adam_beta1, adam_beta2=n.adam_beta2,
                                     adam_epsilon=n.adam_epsilon, optim="adamw_torch", max_grad_norm=n.max_grad_norm,
                                     logging_steps=n.logging_steps, dataloader_num_workers=n.dataloader_num_workers,
                                     **schedule)


def trainer_class(protocol: str) -> type:
    """``Trainer``; under ``authors`` one whose AdamW decays every parameter, as Composer's ``DecoupledAdamW``
    over ``model.parameters()`` did (MB@8c57a0f:src/evals/glue_jobs.py); HF's own skips biases and LayerNorms."""
    from transformers import Trainer
    if protocol != "authors":
        return Trainer

    class DecayAllTrainer(Trainer):
        def get_decay_parameter_names(self, model) -> list[str]:
            return [name for name, _ in model.named_parameters()]

    return DecayAllTrainer


def stopper(cfg: TrainConfig) -> Any:
    """The early-stopping callback of ``cfg.protocol``."""
    stop = cfg.node.early_stopping
    if cfg.protocol == "authors":
        return BatchPatienceStopping(cfg.monitor, stop.patience_batches, stop.min_delta)
    return EarlyStoppingCallback(early_stopping_patience=stop.patience, early_stopping_threshold=stop.min_delta)


def compute_metrics_fn(metric: str, groups: list[tuple[str, int]] | None) -> Callable:
    """A Trainer ``compute_metrics`` returning GLUE metrics (x100) and ``score``, the task score."""
    def fn(pred) -> dict[str, float]:
        return compute(metric, _predicted(pred.predictions), np.asarray(pred.label_ids),
                       groups if groups and len(groups) > 1 else None)

    return fn


def train_and_evaluate(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, train_ds: datasets.Dataset,
                       eval_ds: datasets.Dataset, compute_metrics: Callable, cfg: TrainConfig, output_dir: Path,
                       tracker: Tracker | None = None) -> TrainOutcome:
    """Fine-tune with early stopping and evaluate on ``eval_ds`` the weights ``cfg.protocol`` scores."""
    tracker = tracker or tracking.NONE
    args = training_arguments(cfg, output_dir, len(train_ds), tracker)
    seen: dict[str, Any] = {}

    def recording(pred: Any) -> dict[str, float]:
        seen["pred"] = pred   # the per-example predictions of the evaluation that is scored last
        return compute_metrics(pred)

    trainer = trainer_class(cfg.protocol)(
        model=model,
        args=args,
        train_dataset=train_ds,
        eval_dataset=eval_ds,
        processing_class=tokenizer,
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=recording,
        callbacks=[
            stopper(cfg),
            NaNLossGuard(),
            ProgressLines("training"),
            *tracker.callbacks(),
        ],
    )
    t0 = time.perf_counter()
    with tracker.session():
        result = trainer.train()
    train_seconds = time.perf_counter() - t0
    check_loss(result.training_loss)
    state = trainer.state
    last = cfg.protocol == "authors"
    if not last:
        restore_best_checkpoint(trainer.model, state.best_model_checkpoint)
    t1 = time.perf_counter()
    evals = [h for h in state.log_history if "eval_score" in h]
    ended_on_eval = last and bool(evals) and evals[-1]["step"] == state.global_step
    # authors: an evaluation at the last step is the one scored; else the restored best checkpoint or the last weights
    metrics = evals[-1] if ended_on_eval else trainer.evaluate()
    scored = seen.get("pred")    # that evaluation's predictions (the last compute_metrics call saw them)
    eval_seconds = time.perf_counter() - t1
    history = [{"epoch": round(h["epoch"], 4), "step": h["step"], "score": h["eval_score"]} for h in evals]
    per_epoch = cfg.steps_per_epoch(len(train_ds))
    best_step = state.global_step if last else state.best_global_step
    clean = {k[len("eval_"):]: float(v) for k, v in metrics.items() if k.startswith("eval_") and k not in NOT_METRICS}
    if any(not math.isfinite(v) for v in clean.values()):
        raise TrainingDivergedError(f"dev metrics are not finite ({clean}); the model diverged")
    return TrainOutcome(metrics=clean, best_step=best_step,
                        best_epoch=round(best_step / per_epoch, 4) if best_step else None,
                        epochs_run=round(float(state.epoch or 0.0), 4),
                        stopped_early=state.global_step < state.max_steps, eval_history=history,
                        train_loss=float(result.training_loss), train_seconds=train_seconds, eval_seconds=eval_seconds,
                        scored="last" if last else "best",
                        predictions=_predicted(scored.predictions) if scored is not None else None,
                        labels=np.asarray(scored.label_ids) if scored is not None else None)


#: what an evaluation logs beside the metrics
NOT_METRICS = ("eval_loss", "eval_runtime", "eval_samples_per_second", "eval_steps_per_second", "eval_epoch")


def _predicted(predictions: Any) -> np.ndarray:
    """Class ids (argmax of the logits) or, for one output (regression), the predicted values."""
    logits = np.asarray(predictions[0] if isinstance(predictions, tuple) else predictions, dtype=np.float32)
    return logits.reshape(-1) if logits.ndim == 1 or logits.shape[-1] == 1 else logits.argmax(-1)


def restore_best_checkpoint(model: PreTrainedModel, checkpoint: str | None) -> None:
    """Load every weight of the best checkpoint into ``model``, strictly. Our own: transformers 5.3 saves BERT-family
    LayerNorms as ``gamma``/``beta`` and the Trainer's restore (``strict=False``) silently skips them."""
    if not checkpoint:
        return
    best = type(model).from_pretrained(checkpoint)
    model.load_state_dict(best.state_dict(), strict=True)
    del best


def free_memory() -> None:
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
