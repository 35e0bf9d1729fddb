"""``task=beir``: single-vector (DPR) retrieval as the paper ran it (section 3.1.2, appendix E.2): fine-tune on
MS MARCO hard negatives with sentence-transformers, then nDCG@10 on the 15 BEIR sets."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.evaluation.retriever import Retriever
from harness.families.base import Cell
from harness.families.retrieval import RetrievalFamily, RetrievalSettings
from harness.typed import choices

log = logging.getLogger(__name__)



@dataclass(kw_only=True)
class TrainData:
    """Where DPR training triplets come from (``task.train_data``)."""

    source: str = choices("hub", "file", "beir")
    hub_path: str | None
    hub_config: str | None
    hub_revision: str | None
    max_samples: int | None
    path: str | None
    dataset: str | None
    split: str
    num_negatives: int
    range_min: int
    range_max: int


@dataclass(kw_only=True)
class DenseSettings(RetrievalSettings):
    retriever: str                      # the retrieve.<name> stage (harness/specs/stages.py) that evaluates
    max_length: int
    corpus_chunk_size: int
    similarity: str = choices("cosine", "dot")
    lr: float
    epochs: float
    warmup_ratio: float
    batch_size: int
    gradient_accumulation_steps: int
    loss: str = choices("cached_mnrl", "mnrl")
    mini_batch_size: int
    max_seq_length: int
    train_seed: int
    train_data: TrainData


class DenseFamily(RetrievalFamily):
    """Single-vector retrieval with a SentenceTransformer; optional DPR training."""

    settings_class = DenseSettings
    training_keys = ("task.lr", "task.epochs", "task.warmup_ratio", "task.batch_size",
                     "task.gradient_accumulation_steps", "task.loss", "task.mini_batch_size", "task.max_seq_length",
                     "task.train_seed", "task.train_data")
    search_only_keys = ("task.top_k", "task.similarity")

    @property
    def lr(self) -> float:
        """The learning rate this run trains with (``task.lr``; MLDR in-domain derives it from its source)."""
        return float(self.settings.lr)

    def readable(self) -> dict[str, Any]:
        return {"lr": self.lr} if self.trains else {"eval": self.precision}

    @property
    def triplets(self) -> Any:
        """Where the training triplets come from (:mod:`harness.families.triplet_sources`)."""
        from harness.families.triplet_sources import TRIPLET_SOURCES

        return TRIPLET_SOURCES.lookup(self.settings.train_data.source)

    def training_identity(self) -> dict[str, Any]:
        return self.triplets.identity(self)

    def hyperparameters(self) -> dict[str, Any]:
        s = self.settings
        hp = super().hyperparameters()
        if not self.trains:
            return hp
        data = {"source": s.train_data.source, **self.triplets.describe(s.train_data)}
        train = {"data": data, "lr": self.lr, "epochs": s.epochs, "warmup_ratio": s.warmup_ratio,
                 "batch_size": s.batch_size, "gradient_accumulation_steps": s.gradient_accumulation_steps,
                 "loss": s.loss, "mini_batch_size": s.mini_batch_size, "max_seq_length": s.max_seq_length,
                 "seed": s.train_seed}
        return hp | {"train": train, "lr": self.lr, "epochs": s.epochs, "batch_size": s.batch_size,
                     "gradient_accumulation_steps": s.gradient_accumulation_steps, "seed": s.train_seed}

    def load_model(self) -> tuple[Any, dict[str, Any]]:
        from harness.models import load_sentence_transformer

        return load_sentence_transformer(self.spec, device=self.device)

    def retriever(self, model: Any, cache_identity: Mapping[str, Any]) -> Retriever:
        """The ``retrieve.<task.retriever>`` stage's retriever (:mod:`harness.families.retrievers`)."""
        from harness.families.retrievers import build

        return build(self, model, cache_identity)

    def load_trained(self, model_dir: str) -> Any:
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(model_dir, device=self.device)

    def check_training_data(self) -> None:
        """The triplets' file exists, the hub is reachable for the hub set, or the BEIR set's folder is there."""
        self.triplets.check(self)

    def fit(self, model: Any, todo: Sequence[Cell], out_dir: Path) -> dict[str, Any]:
        """DPR fine-tuning (sentence-transformers' trainer, (Cached)MNRL)."""
        from harness.training.dense import DenseTrainingConfig, train_dense

        s = self.settings
        train_ds = self.training_data(model)
        tcfg = DenseTrainingConfig(
            lr=self.lr, epochs=s.epochs, warmup_ratio=s.warmup_ratio, batch_size=s.batch_size,
            gradient_accumulation_steps=s.gradient_accumulation_steps, loss=s.loss, mini_batch_size=s.mini_batch_size,
            max_seq_length=s.max_seq_length, seed=s.train_seed, precision=self.precision, use_cpu=self.device == "cpu",
        )
        return train_dense(model, train_ds, tcfg, out_dir, self.tracker(todo[0]))

    def training_data(self, model: Any):
        return self.triplets.load(self, model)


class BeirFamily(DenseFamily):
    """task=beir (and any single-vector retrieval task whose spec names runner: beir)."""
