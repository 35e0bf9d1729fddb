"""``task=beir`` (and nanobeir): single-vector (DPR) retrieval as the paper ran it (section 3.1.2, appendix E.2):
fine-tune on MS MARCO hard negatives with sentence-transformers (``train.dense``), then nDCG@10 on the 15 BEIR sets
(``retrieve.single_vector``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from harness.families.retrieval import RetrievalFamily, RetrievalKind, RetrievalSettings
from harness.typed import at_least, choices, count


@dataclass(kw_only=True)
class TrainData:
    """Where DPR training triplets come from (``task.train_data``)."""

    sources: ClassVar[str] = "harness.families.triplet_sources:TRIPLET_SOURCES"
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
class DenseSettings(RetrievalSettings):
    retriever: str                      # the retrieve.<name> stage (harness/specs/stages.py) that evaluates
    max_length: int = count()
    corpus_chunk_size: int = count()
    similarity: str = choices("cosine", "dot")
    loss: str = choices("cached_mnrl", "mnrl")
    mini_batch_size: int = count()
    max_seq_length: int = count()
    train_data: TrainData


def evaluation(task: RetrievalFamily) -> dict[str, Any]:
    """The evaluation settings a single-vector record shows (selection and the leaderboard read them)."""
    s = task.settings
    return {"train": None, "precision": task.precision, "max_length": s.max_length, "top_k": s.top_k,
            "max_queries": s.max_queries, "max_docs": s.max_docs}


def dense_training(task: RetrievalFamily, data: dict[str, Any]) -> dict[str, Any]:
    """The DPR training settings a record shows (``data``: what the source says of its rows)."""
    s = task.settings
    train = {"data": data, "lr": task.lr, "epochs": s.epochs, "warmup_ratio": s.warmup_ratio,
             "batch_size": s.batch_size, "gradient_accumulation_steps": s.gradient_accumulation_steps,
             "loss": s.loss, "mini_batch_size": s.mini_batch_size, "max_seq_length": s.max_seq_length,
             "seed": s.train_seed}
    return {"train": train, "lr": task.lr, "epochs": s.epochs, "batch_size": s.batch_size,
            "gradient_accumulation_steps": s.gradient_accumulation_steps, "seed": s.train_seed}


def hyperparameters(task: RetrievalFamily) -> dict[str, Any]:
    if not task.trains:
        return evaluation(task)
    data = {"source": task.settings.train_data.source, **task.training_source.describe(task)}
    return evaluation(task) | dense_training(task, data)


BEIR = RetrievalKind(DenseSettings, hyperparameters)
