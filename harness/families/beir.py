"""``task=beir`` (and nanobeir): single-vector (DPR) retrieval as the paper ran it (section 3.1.2, appendix E.2):
fine-tune on MS MARCO hard negatives with sentence-transformers (``train.dense``), then nDCG@10 on the 15 BEIR sets
(``retrieve.single_vector``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from harness.evaluation.settings import SingleVectorEval
from harness.families.retrieval import Resolved, RetrievalKind, RetrievalSettings
from harness.families.triplet_sources import TRIPLET_SOURCES
from harness.registry import Registry
from harness.training.settings import DenseTraining, TrainRows
from harness.typed import at_least, choices, count, flat


@dataclass(kw_only=True)
class TrainData(TrainRows):
    """Where DPR training triplets come from: the hub's MS MARCO set, a local file, or mined from a BEIR train split."""

    sources: ClassVar[Registry[Any]] = TRIPLET_SOURCES
    source: str = choices("hub", "file", "beir")
    hub_path: str | None
    hub_config: str | None
    hub_revision: str | None
    max_samples: int | None = count(null="every row")
    split_seed: int                     # picks the rows (the authors' split); task.train_seed seeds training
    path: str | None
    dataset: str | None
    split: str
    num_negatives: int = count()
    range_min: int = at_least(0)
    range_max: int = count()


@dataclass(kw_only=True)
class BeirSettings(RetrievalSettings):
    """task=beir's stages: ``retrieve.<retriever>`` (single-vector: its evaluation node) and ``train.dense``."""

    retriever: str                      # the retrieve.<name> stage (harness/specs/stages.py) that evaluates
    evaluation: SingleVectorEval = flat()
    training: DenseTraining = flat()
    train_data: TrainData


def evaluation(r: Resolved) -> dict[str, Any]:
    """The evaluation settings a single-vector record shows (selection and the leaderboard read them)."""
    s = r.settings
    return {"train": None, "precision": r.precision, "max_length": s.evaluation.max_length,
            "top_k": s.ranking.top_k, "max_queries": s.max_queries, "max_docs": s.max_docs}


def dense_training(r: Resolved, data: dict[str, Any]) -> dict[str, Any]:
    """The DPR training settings a record shows (``data``: what the source says of its rows)."""
    t = r.settings.training
    train = {"data": data, "lr": r.lr, "epochs": t.epochs, "warmup_ratio": t.warmup_ratio,
             "batch_size": t.batch_size, "gradient_accumulation_steps": t.gradient_accumulation_steps,
             "loss": t.loss, "mini_batch_size": t.mini_batch_size, "max_seq_length": t.max_seq_length,
             "seed": t.train_seed}
    if t.gather_across_devices:     # another objective (in the run id): shown where it is on only
        train |= {"gather_across_devices": True, "devices": t.devices}
    return {"train": train, **schedule(r)}


def schedule(r: Resolved) -> dict[str, Any]:
    """The training schedule every trained retrieval record shows at its top level (selection reads it)."""
    t = r.settings.training
    return {"lr": r.lr, "epochs": t.epochs, "batch_size": t.batch_size,
            "gradient_accumulation_steps": t.gradient_accumulation_steps, "seed": t.train_seed}


def hyperparameters(r: Resolved) -> dict[str, Any]:
    if not r.trains:
        return evaluation(r)
    return evaluation(r) | dense_training(r, {"source": r.settings.train_data.source, **r.data})


BEIR = RetrievalKind(BeirSettings, hyperparameters)
