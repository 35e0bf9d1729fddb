"""``task=beir``: single-vector (DPR) retrieval as the paper ran it (section 3.1.2, appendix E.2): fine-tune on
MS MARCO hard negatives with sentence-transformers, then nDCG@10 on the 15 BEIR sets."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.data.catalog import check_local, resolve_entries
from harness.errors import DataError, HarnessError
from harness.evaluation.retriever import Retriever
from harness.families.base import Cell
from harness.families.retrieval import RetrievalFamily, RetrievalSettings
from harness.results import file_sha
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

    def training_identity(self) -> dict[str, Any]:
        d = self.settings.train_data
        if d.source == "file":
            return {"task.train_data.path": {"sha256": file_sha(d.path)}}
        if d.source == "beir" and d.dataset:
            (entry,) = resolve_entries([d.dataset], self.settings.catalog)
            return {"task.train_data.data_spec": self.data_spec(entry)}
        return {}

    def hyperparameters(self) -> dict[str, Any]:
        s = self.settings
        hp = super().hyperparameters()
        if not self.trains:
            return hp
        d = s.train_data
        data: dict[str, Any] = {"source": d.source}
        if d.source == "hub":
            data |= {"hub_path": d.hub_path, "hub_config": d.hub_config, "hub_revision": d.hub_revision,
                     "max_samples": d.max_samples}
        elif d.source == "file":
            data |= {"path": d.path, "file_sha": file_sha(d.path), "max_samples": d.max_samples}
        else:
            data |= {"dataset": d.dataset, "split": d.split, "num_negatives": d.num_negatives,
                     "range_min": d.range_min, "range_max": d.range_max}
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
        d, s = self.settings.train_data, self.settings
        if d.source == "file":
            if not d.path:
                raise HarnessError("task.train_data.source=file needs task.train_data.path=<triplets .tsv/.csv/.jsonl>")
            if not Path(d.path).expanduser().is_file():
                raise DataError(f"training triplets not found: task.train_data.path={d.path}. Point it at a "
                                ".tsv/.csv/.jsonl file of (query, positive, negative) rows.")
        elif d.source == "hub":
            from harness.models import require_hub

            require_hub(f"DPR training data {d.hub_path}@{d.hub_revision}",
                        "Offline, train on a local file: task.train_data.source=file task.train_data.path=<triplets "
                        ".tsv/.jsonl>, or mine from a local BEIR train split: task.train_data.source=beir "
                        "task.train_data.dataset=<name> task.data_dir=<dir>.")
        else:
            if not d.dataset:
                raise HarnessError("task.train_data.source=beir needs task.train_data.dataset=<BEIR name with a train "
                                   "split>")
            (entry,) = resolve_entries([d.dataset], s.catalog)
            if not s.data_dir:
                raise DataError(f"task.train_data.source=beir reads {d.dataset}'s {d.split} split from a local folder: "
                                f"pass task.data_dir=<dir containing {entry.local or entry.name}/>.")
            check_local(entry, s.data_dir, d.split)

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
        from harness.data import triplets
        from harness.data.catalog import load_entry

        s = self.settings
        d = s.train_data
        if d.source == "file":
            if not d.path:
                raise HarnessError("task.train_data.source=file needs task.train_data.path=<triplets .tsv/.csv/.jsonl>")
            return triplets.sample(triplets.load_triplets_file(d.path), d.max_samples, s.train_seed)
        if d.source == "hub":
            return triplets.load_hub_triplets(str(d.hub_path), str(d.hub_config), d.hub_revision, d.max_samples,
                                              s.train_seed)
        if not d.dataset:
            raise HarnessError("task.train_data.source=beir needs task.train_data.dataset=<BEIR name with a train split>")
        (entry,) = resolve_entries([d.dataset], s.catalog)
        ds = load_entry(entry, data_dir=s.data_dir, split=d.split, strict_qrels=s.strict_qrels)
        return triplets.mine_from_beir(ds, model, num_negatives=d.num_negatives, range_min=d.range_min,
                                       range_max=d.range_max)


class BeirFamily(DenseFamily):
    """task=beir (and any single-vector retrieval task whose spec names runner: beir)."""
