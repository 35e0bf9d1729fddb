"""What every trainer shares: the training arguments built from a settings node (harness.training.arguments) and
the end of a run (there too)."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.core.errors import HarnessError, TrainingDivergedError
from harness.core.typed import from_conf
from harness.training.arguments import check_loss, finish_training, training_arguments
from harness.training.settings import DenseTraining, KdTraining, TrainRun


def dense(**keys: object) -> DenseTraining:
    """task=beir's ``train.dense`` node (conf/task/beir.yaml; the model's DPR keys given), ``keys`` on top."""
    return from_conf(DenseTraining, "task/beir", part=True, **{"lr": 3e-5, "batch_size": 16,
                                                               "gradient_accumulation_steps": 1, **keys})


def kd(**keys: object) -> KdTraining:
    """task=colbert's ``train.kd`` node (conf/task/colbert.yaml; the model's LR given), ``keys`` on top."""
    return from_conf(KdTraining, "task/colbert", part=True, **{"lr": 1e-4, **keys})


def run(**values: object) -> TrainRun:
    return TrainRun(**{"lr": 1e-4, "epochs": 1.0, "seed": 12, "precision": "fp32", "device": "cpu", **values})


def test_shared_fields_come_from_the_settings_node(tmp_path: Path) -> None:
    node = dense(warmup_ratio=0.05, batch_size=8, gradient_accumulation_steps=4)
    args = training_arguments(node, run(lr=3e-5, epochs=2, seed=7, precision="bf16"), tmp_path / "checkpoints",
                              logging_steps=3)
    assert (args.learning_rate, args.num_train_epochs, args.warmup_steps) == (3e-5, 2, 0.05)
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (8, 4)
    assert (args.seed, args.data_seed, args.bf16, args.fp16, args.use_cpu) == (7, 7, True, False, True)
    assert args.output_dir == str(tmp_path / "checkpoints") and args.logging_steps == 3
    assert args.save_strategy == "no" and not args.logging_nan_inf_filter and args.report_to in ([], "none", ["none"])
    assert type(args).__name__ == "SentenceTransformerTrainingArguments"


def test_a_caller_adds_or_overrides_fields(tmp_path: Path) -> None:
    args = training_arguments(kd(warmup_ratio=0.0), run(), tmp_path, sentence_transformers=False,
                              save_strategy="epoch", eval_strategy="epoch", weight_decay=0.1)
    assert type(args).__name__ == "TrainingArguments"
    assert (args.save_strategy, args.weight_decay, args.warmup_steps) == ("epoch", 0.1, 0)


class Saved:
    def __init__(self) -> None:
        self.to: str | None = None

    def save(self, path: str) -> None:
        self.to = path


def test_finish_checks_saves_and_reports(tmp_path: Path) -> None:
    cfg = kd(batch_size=4, gradient_accumulation_steps=2)
    model = Saved()
    facts = finish_training(model, SimpleNamespace(global_step=3, training_loss=0.25), tmp_path, cfg=cfg, n_rows=30,
                            rows="samples", facts={"loss": "kl"})
    assert model.to == str(tmp_path / "model")
    assert facts == {"steps": 3, "train_loss": 0.25, "n_samples": 30, "effective_batch_size": 8, "loss": "kl",
                     "model_dir": str(tmp_path / "model")}


def test_zero_steps_and_divergence_fail_before_saving(tmp_path: Path) -> None:
    cfg = dense(batch_size=16, gradient_accumulation_steps=2)
    model = Saved()
    with pytest.raises(HarnessError, match=r"^training ran 0 optimisation steps on 5 triplets \(batch 16 x "
                                           r"accumulation 2\): lower task.batch_size"):
        finish_training(model, SimpleNamespace(global_step=0, training_loss=0.0), tmp_path, cfg=cfg, n_rows=5,
                        rows="triplets")
    with pytest.raises(TrainingDivergedError, match=r"mean training loss is nan: the run diverged; lower task.lr"):
        finish_training(model, SimpleNamespace(global_step=2, training_loss=math.nan), tmp_path, cfg=cfg, n_rows=5,
                        rows="triplets")
    assert model.to is None
    check_loss(1.0)
